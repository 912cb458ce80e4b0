package resources

import (
	"cmp"
	"net/url"
	"path"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// The default probes of a step of protocol OpenInferenceProtocol.
const (
	// DefaultModelLoadTimeoutSeconds is how long the default startup probe waits for a model to
	// load when modelLoadTimeoutSeconds is unset.
	DefaultModelLoadTimeoutSeconds = int32(600)
	oipStartupPeriod               = int32(10)
	oipReadinessPeriod             = int32(5)
	oipLivenessPeriod              = int32(10)
	oipProbeTimeout                = int32(5)
	oipFailureThreshold            = int32(3)
	oipLivePath                    = "/v2/health/live"
)

// OpenInference reports whether step i of p speaks the Open Inference Protocol.
func OpenInference(p *pipelinev1.Pipeline, i int) bool {
	return p.Spec.Steps[i].Protocol == pipelinev1.StepProtocolOpenInference
}

// ServedModelName is the name under which the server of step i serves its model in the Open
// Inference Protocol: the last element of its model path (resnet for models/resnet).
func ServedModelName(p *pipelinev1.Pipeline, i int) string {
	return path.Base(p.Spec.Steps[i].Model)
}

// oipModelPath is the Open Inference Protocol path of step i's model, /v2/models/<name>, plus
// suffix (/ready, /infer).
func oipModelPath(p *pipelinev1.Pipeline, i int, suffix string) string {
	return "/v2/models/" + url.PathEscape(ServedModelName(p, i)) + suffix
}

// InferPath is the path the router posts a request to at step i: the root of its Service, or
// for the Open Inference Protocol /v2/models/<name>/infer.
func InferPath(p *pipelinev1.Pipeline, i int) string {
	if OpenInference(p, i) {
		return oipModelPath(p, i, "/infer")
	}
	return "/"
}

// StepProbes are the readiness, liveness and startup probes of step i's container: those the
// step declares, and for a step of protocol OpenInferenceProtocol the protocol's where it
// declares none. nil is no probe.
func StepProbes(p *pipelinev1.Pipeline, i int) (readiness, liveness, startup *corev1.Probe) {
	s := &p.Spec.Steps[i]
	readiness, liveness, startup = s.ReadinessProbe, s.LivenessProbe, s.StartupProbe
	if !OpenInference(p, i) {
		return readiness, liveness, startup
	}
	port := StepPort(p, i)
	if readiness == nil {
		readiness = httpProbe(oipModelPath(p, i, "/ready"), port, oipReadinessPeriod, oipFailureThreshold)
	}
	if liveness == nil {
		liveness = httpProbe(oipLivePath, port, oipLivenessPeriod, oipFailureThreshold)
	}
	if startup == nil {
		patience := ptr.Deref(s.ModelLoadTimeoutSeconds, DefaultModelLoadTimeoutSeconds)
		startup = httpProbe(oipModelPath(p, i, "/ready"), port, oipStartupPeriod, (patience+oipStartupPeriod-1)/oipStartupPeriod)
	}
	return readiness, liveness, startup
}

// StartupPatience is how long step i's startup probe (its own, or the default of protocol
// OpenInferenceProtocol, which modelLoadTimeoutSeconds sets) lets a container start and load its
// model before the kubelet restarts it: initialDelaySeconds and failureThreshold × periodSeconds,
// with Kubernetes' defaults. Zero without a startup probe.
func StartupPatience(p *pipelinev1.Pipeline, i int) time.Duration {
	_, _, startup := StepProbes(p, i)
	if startup == nil {
		return 0
	}
	period, failures := cmp.Or(startup.PeriodSeconds, 10), cmp.Or(startup.FailureThreshold, 3)
	return time.Duration(startup.InitialDelaySeconds+period*failures) * time.Second
}

// httpProbe is a probe that GETs path on port every period seconds, and fails after failures
// failures in a row.
func httpProbe(path string, port, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}},
		PeriodSeconds:    period,
		TimeoutSeconds:   oipProbeTimeout,
		SuccessThreshold: 1,
		FailureThreshold: failures,
	}
}
