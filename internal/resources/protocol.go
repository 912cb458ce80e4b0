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

// The default probes of a step of protocol OpenInferenceProtocol or OpenInferenceProtocolGRPC.
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

// OpenInference reports whether step i of p speaks the Open Inference Protocol, over REST or
// gRPC.
func OpenInference(p *pipelinev1.Pipeline, i int) bool {
	return p.Spec.Steps[i].Protocol.OpenInference()
}

// GRPC reports whether step i of p speaks the Open Inference Protocol's gRPC service.
func GRPC(p *pipelinev1.Pipeline, i int) bool {
	return p.Spec.Steps[i].Protocol == pipelinev1.StepProtocolOpenInferenceGRPC
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
// for the Open Inference Protocol's REST API /v2/models/<name>/infer. A gRPC step has none: the
// router calls its service at the Service's address.
func InferPath(p *pipelinev1.Pipeline, i int) string {
	if GRPC(p, i) {
		return ""
	}
	if OpenInference(p, i) {
		return oipModelPath(p, i, "/infer")
	}
	return "/"
}

// StepProbes are the readiness, liveness and startup probes of step i's container: those the
// step declares, and for a step of the Open Inference Protocol the protocol's where it declares
// none. nil is no probe.
//
// The defaults of protocol OpenInferenceProtocol GET the model's readiness and the server's
// liveness. Those of OpenInferenceProtocolGRPC open a TCP connection to the port: Kubernetes'
// grpc probes speak the standard gRPC health service (grpc.health.v1), which not every model
// server implements, and a step whose server does may declare grpc probes of its own. The
// router still reads the model's metadata before it is ready.
func StepProbes(p *pipelinev1.Pipeline, i int) (readiness, liveness, startup *corev1.Probe) {
	s := &p.Spec.Steps[i]
	readiness, liveness, startup = s.ReadinessProbe, s.LivenessProbe, s.StartupProbe
	if !OpenInference(p, i) {
		return readiness, liveness, startup
	}
	port := intstr.FromInt32(StepPort(p, i))
	// get is the handler that GETs path, or for gRPC opens a connection to the port; each probe
	// gets its own: none shares a pointer with another.
	get := func(path string) corev1.ProbeHandler {
		if GRPC(p, i) {
			return corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: port}}
		}
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: port}}
	}
	if readiness == nil {
		readiness = defaultProbe(get(oipModelPath(p, i, "/ready")), oipReadinessPeriod, oipFailureThreshold)
	}
	if liveness == nil {
		liveness = defaultProbe(get(oipLivePath), oipLivenessPeriod, oipFailureThreshold)
	}
	if startup == nil {
		patience := ptr.Deref(s.ModelLoadTimeoutSeconds, DefaultModelLoadTimeoutSeconds)
		startup = defaultProbe(get(oipModelPath(p, i, "/ready")), oipStartupPeriod, (patience+oipStartupPeriod-1)/oipStartupPeriod)
	}
	return readiness, liveness, startup
}

// StartupPatience is how long step i's startup probe (its own, or the default of protocol
// OpenInferenceProtocol or OpenInferenceProtocolGRPC, which modelLoadTimeoutSeconds sets) lets a container start and load its
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

// defaultProbe is a probe that runs handler every period seconds, and fails after failures
// failures in a row.
func defaultProbe(handler corev1.ProbeHandler, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     handler,
		PeriodSeconds:    period,
		TimeoutSeconds:   oipProbeTimeout,
		SuccessThreshold: 1,
		FailureThreshold: failures,
	}
}
