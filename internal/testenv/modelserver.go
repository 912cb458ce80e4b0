package testenv

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// ModelServerStep is step s with every field a model server may need set, as a Triton step
// would set them: its command and arguments, three probes (by the container port's name, by
// number, and exec), labels and annotations of its pods, a RuntimeClass, shared memory, a pull
// Secret and a termination grace period. Its port stays the step's.
func ModelServerStep(s pipelinev1.Step) pipelinev1.Step {
	s.Command = []string{"tritonserver"}
	s.Args = []string{"--model-repository=$(MODEL_PATH)", "--strict-readiness=true"}
	s.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/v2/health/ready", Port: intstr.FromString("http")}},
		PeriodSeconds: 5,
	}
	// Triton's gRPC port.
	s.LivenessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8001)}},
		FailureThreshold: 3,
	}
	s.StartupProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "test -d \"$MODEL_PATH\""}}},
		FailureThreshold: 60,
		PeriodSeconds:    10,
	}
	s.PodMetadata = &pipelinev1.StepPodMetadata{
		Labels:      map[string]string{"team": "vision", "example.com/tier": "gpu"},
		Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8002"},
	}
	s.RuntimeClassName = "nvidia"
	s.SharedMemorySize = ptr.To(resource.MustParse("2Gi"))
	s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry-credentials"}}
	s.TerminationGracePeriodSeconds = ptr.To[int64](120)
	return s
}
