package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// Bounds of the fields a model server needs that the CRD cannot check itself: a CEL rule that
// went over every entry of a list of a Kubernetes type (exec.command, httpGet.httpHeaders),
// whose schema has no maxItems, exceeds the CRD's cost budget many times over.
const (
	maxProbeCommandItem   = 4096
	maxProbeHeaderName    = 256
	maxProbeHeaderValue   = 4096
	maxSharedMemorySize   = "64Gi"
	probeHandlersExpected = "exec, httpGet, tcpSocket or grpc"
)

var sharedMemoryLimit = resource.MustParse(maxSharedMemorySize)

// validateModelServer checks the fields of step s, at sp, that a model server needs and the
// apiserver would otherwise refuse only in the step's Deployment: the probes, the pods' labels
// and annotations, the shared memory and the pull Secrets.
func validateModelServer(s *pipelinev1.Step, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
	}{{"readinessProbe", s.ReadinessProbe}, {"livenessProbe", s.LivenessProbe}, {"startupProbe", s.StartupProbe}} {
		if p.probe != nil {
			errs = append(errs, validateProbe(p.probe, p.name, sp.Child(p.name))...)
		}
	}
	if m := s.PodMetadata; m != nil {
		errs = append(errs, validatePodMetadata(m, sp.Child("podMetadata"))...)
	}
	if q := s.SharedMemorySize; q != nil && (q.Sign() <= 0 || q.Cmp(sharedMemoryLimit) > 0) {
		errs = append(errs, field.Invalid(sp.Child("sharedMemorySize"), q.String(),
			"must be greater than zero and at most "+maxSharedMemorySize+", e.g. 1Gi"))
	}
	for j, secret := range s.ImagePullSecrets {
		errs = append(errs, validateObjectName(secret.Name, sp.Child("imagePullSecrets").Index(j).Child("name"), "Secret")...)
	}
	return errs
}

// validateProbe checks probe, the step container's probe called name, at pp: one handler, on
// the container's port (a number, or its name) with bounded lengths, and the numbers Kubernetes
// accepts for a probe of that kind.
func validateProbe(probe *corev1.Probe, name string, pp *field.Path) field.ErrorList {
	handlers, errs := validateProbeHandlers(probe.ProbeHandler, pp)
	switch len(handlers) {
	case 0:
		errs = append(errs, field.Required(pp, "a probe needs one handler: "+probeHandlersExpected))
	case 1:
	default:
		errs = append(errs, field.Forbidden(pp, fmt.Sprintf("a probe takes one handler, not %s: keep one of them",
			strings.Join(handlers, " and "))))
	}
	for _, n := range []struct {
		name  string
		value int32
	}{{"initialDelaySeconds", probe.InitialDelaySeconds}, {"timeoutSeconds", probe.TimeoutSeconds}, {"periodSeconds", probe.PeriodSeconds},
		{"successThreshold", probe.SuccessThreshold}, {"failureThreshold", probe.FailureThreshold}} {
		if n.value < 0 {
			errs = append(errs, field.Invalid(pp.Child(n.name), n.value, "must not be negative"))
		}
	}
	if name != "readinessProbe" && probe.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(pp.Child("successThreshold"), probe.SuccessThreshold, "must be 1 for a "+name))
	}
	if g := probe.TerminationGracePeriodSeconds; g != nil {
		switch {
		case name == "readinessProbe":
			errs = append(errs, field.Forbidden(pp.Child("terminationGracePeriodSeconds"),
				"a readinessProbe has none: a failed readiness probe does not stop the container"))
		case *g <= 0:
			errs = append(errs, field.Invalid(pp.Child("terminationGracePeriodSeconds"), *g, "must be greater than zero"))
		}
	}
	return errs
}

// validateProbeHandlers checks the handlers of a probe, at pp, and names those it sets.
func validateProbeHandlers(h corev1.ProbeHandler, pp *field.Path) ([]string, field.ErrorList) {
	var handlers []string
	var errs field.ErrorList
	if h.Exec != nil {
		handlers = append(handlers, "exec")
		cp := pp.Child("exec", "command")
		if len(h.Exec.Command) == 0 {
			errs = append(errs, field.Required(cp, "the command the probe runs in the container"))
		}
		for j, arg := range h.Exec.Command {
			if len(arg) > maxProbeCommandItem {
				errs = append(errs, field.TooLong(cp.Index(j), "", maxProbeCommandItem))
			}
		}
	}
	if g := h.HTTPGet; g != nil {
		handlers = append(handlers, "httpGet")
		errs = append(errs, validateHTTPGet(g, pp.Child("httpGet"))...)
	}
	if t := h.TCPSocket; t != nil {
		handlers = append(handlers, "tcpSocket")
		errs = append(errs, validateProbePort(t.Port, pp.Child("tcpSocket", "port"))...)
	}
	if g := h.GRPC; g != nil {
		handlers = append(handlers, "grpc")
		if g.Port < 1 || g.Port > 65535 {
			errs = append(errs, field.Invalid(pp.Child("grpc", "port"), g.Port, "must be a port number from 1 to 65535"))
		}
		if g.Mode != nil {
			errs = append(errs, field.Forbidden(pp.Child("grpc", "mode"), alphaProbeField("GRPCContainerProbeTLS")))
		}
	}
	return handlers, errs
}

// validateHTTPGet checks the httpGet handler of a probe, at gp: its port, scheme and headers.
func validateHTTPGet(g *corev1.HTTPGetAction, gp *field.Path) field.ErrorList {
	errs := validateProbePort(g.Port, gp.Child("port"))
	switch g.Scheme {
	case "", corev1.URISchemeHTTP, corev1.URISchemeHTTPS:
	default:
		errs = append(errs, field.NotSupported(gp.Child("scheme"), g.Scheme, []string{string(corev1.URISchemeHTTP), string(corev1.URISchemeHTTPS)}))
	}
	if g.Protocol != nil {
		errs = append(errs, field.Forbidden(gp.Child("protocol"), alphaProbeField("H2CContainerProbe")))
	}
	for j, header := range g.HTTPHeaders {
		hp := gp.Child("httpHeaders").Index(j)
		if len(header.Name) > maxProbeHeaderName {
			errs = append(errs, field.TooLong(hp.Child("name"), "", maxProbeHeaderName))
		} else {
			for _, msg := range validation.IsHTTPHeaderName(header.Name) {
				errs = append(errs, field.Invalid(hp.Child("name"), header.Name, "not a valid HTTP header name: "+msg))
			}
		}
		if len(header.Value) > maxProbeHeaderValue {
			errs = append(errs, field.TooLong(hp.Child("value"), "", maxProbeHeaderValue))
		}
	}
	return errs
}

// alphaProbeField is why a probe field behind the alpha Kubernetes feature gate is refused: an
// apiserver without the feature drops it from the step's Deployment, which would then never match
// what the operator applies.
func alphaProbeField(gate string) string {
	return fmt.Sprintf("needs the alpha Kubernetes feature %s, without which the apiserver drops it from the step's Deployment: remove it", gate)
}

// validateProbePort checks the port of a probe's httpGet or tcpSocket handler, at pp: a number,
// or the name of the step container's one port.
func validateProbePort(port intstr.IntOrString, pp *field.Path) field.ErrorList {
	switch {
	case port.Type == intstr.Int && port.IntVal >= 1 && port.IntVal <= 65535:
	case port.Type == intstr.String && port.StrVal == resources.StepPortName:
	default:
		return field.ErrorList{field.Invalid(pp, port.String(), fmt.Sprintf(
			"must be a port number from 1 to 65535 or %s, the name of the step container's port", resources.StepPortName))}
	}
	return nil
}

// validatePodMetadata checks the labels and annotations of a step's pods, at mp: Kubernetes label
// keys and values and annotation keys, none the operator's own (resources.IsReservedLabel,
// resources.IsReservedAnnotation), and annotations that fit in an object's metadata.
func validatePodMetadata(m *pipelinev1.StepPodMetadata, mp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		kp := mp.Child("labels").Key(k)
		switch {
		case resources.IsOperatorLabel(k):
			errs = append(errs, field.Forbidden(kp, fmt.Sprintf("label %s is the operator's: it selects and names the step's pods", k)))
			continue
		case strings.HasPrefix(k, resources.ReservedKeyPrefix):
			errs = append(errs, field.Forbidden(kp, fmt.Sprintf("label %s is under %s, whose keys are the operator's", k, resources.ReservedKeyPrefix)))
			continue
		}
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(kp, k, "not a valid label key: "+msg))
		}
		for _, msg := range validation.IsValidLabelValue(m.Labels[k]) {
			errs = append(errs, field.Invalid(kp, m.Labels[k], "not a valid label value: "+msg))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Annotations)) {
		kp := mp.Child("annotations").Key(k)
		if resources.IsReservedAnnotation(k) {
			errs = append(errs, field.Forbidden(kp, fmt.Sprintf("annotation %s is under %s, whose keys are the operator's", k, resources.ReservedKeyPrefix)))
			continue
		}
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, field.Invalid(kp, k, "not a valid annotation key: "+msg))
		}
	}
	if err := apimachineryvalidation.ValidateAnnotationsSize(m.Annotations); err != nil {
		errs = append(errs, field.TooLong(mp.Child("annotations"), "", apimachineryvalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}
