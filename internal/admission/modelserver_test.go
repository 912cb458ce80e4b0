package admission

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// httpProbe is a probe of the step container's port by name.
func httpProbe() *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/v2/health/ready", Port: intstr.FromString("http")}}}
}

// What the validating webhook refuses of the fields a model server needs, with its exact
// messages; each case edits the sample's first step.
func TestValidateModelServerFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(s *pipelinev1.Step)
		want []string
	}{{
		name: "every field, as a Triton step sets them",
		edit: func(s *pipelinev1.Step) { *s = testenv.ModelServerStep(*s) },
	}, {
		name: "a probe without a handler",
		edit: func(s *pipelinev1.Step) { s.ReadinessProbe = &corev1.Probe{PeriodSeconds: 5} },
		want: []string{"spec.steps[0].readinessProbe: Required value: a probe needs one handler: exec, httpGet, tcpSocket or grpc"},
	}, {
		name: "a probe with two handlers",
		edit: func(s *pipelinev1.Step) {
			s.LivenessProbe = httpProbe()
			s.LivenessProbe.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}
		},
		want: []string{"spec.steps[0].livenessProbe: Forbidden: a probe takes one handler, not httpGet and tcpSocket: keep one of them"},
	}, {
		name: "ports by number out of range",
		edit: func(s *pipelinev1.Step) {
			s.ReadinessProbe = httpProbe()
			s.ReadinessProbe.HTTPGet.Port = intstr.FromInt32(0)
			s.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(65536)}}}
			s.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: -1}}}
		},
		want: []string{
			`spec.steps[0].readinessProbe.httpGet.port: Invalid value: "0": must be a port number from 1 to 65535 or http, the name of the step container's port`,
			`spec.steps[0].livenessProbe.tcpSocket.port: Invalid value: "65536": must be a port number from 1 to 65535 or http, the name of the step container's port`,
			`spec.steps[0].startupProbe.grpc.port: Invalid value: -1: must be a port number from 1 to 65535`,
		},
	}, {
		name: "a named port that is not the container's",
		edit: func(s *pipelinev1.Step) {
			s.ReadinessProbe = httpProbe()
			s.ReadinessProbe.HTTPGet.Port = intstr.FromString("metrics")
		},
		want: []string{`spec.steps[0].readinessProbe.httpGet.port: Invalid value: "metrics": must be a port number from 1 to 65535 or http, the name of the step container's port`},
	}, {
		name: "exec probes are allowed, with a command",
		edit: func(s *pipelinev1.Step) {
			s.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}}}
			s.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}}
		},
		want: []string{"spec.steps[0].startupProbe.exec.command: Required value: the command the probe runs in the container"},
	}, {
		name: "lengths the CRD cannot check",
		edit: func(s *pipelinev1.Step) {
			s.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", strings.Repeat("c", 4097)}}}}
			s.ReadinessProbe = httpProbe()
			s.ReadinessProbe.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{
				{Name: strings.Repeat("H", 257), Value: "v"}, {Name: "Bad Header", Value: strings.Repeat("v", 4097)}}
			s.ReadinessProbe.HTTPGet.Scheme = "FTP"
		},
		want: []string{
			"spec.steps[0].readinessProbe.httpGet.scheme: Unsupported value: \"FTP\": supported values: \"HTTP\", \"HTTPS\"",
			"spec.steps[0].readinessProbe.httpGet.httpHeaders[0].name: Too long: may not be more than 256 bytes",
			"spec.steps[0].readinessProbe.httpGet.httpHeaders[1].name: Invalid value: \"Bad Header\": not a valid HTTP header name: " +
				"a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
			"spec.steps[0].readinessProbe.httpGet.httpHeaders[1].value: Too long: may not be more than 4096 bytes",
			"spec.steps[0].livenessProbe.exec.command[1]: Too long: may not be more than 4096 bytes",
		},
	}, {
		name: "fields of alpha Kubernetes features",
		edit: func(s *pipelinev1.Step) {
			s.ReadinessProbe = httpProbe()
			s.ReadinessProbe.HTTPGet.Protocol = ptr.To(corev1.HTTPProtocolHTTP2)
			s.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 8001, Mode: ptr.To(corev1.GRPCProbeModeTLS)}}}
		},
		want: []string{
			"spec.steps[0].readinessProbe.httpGet.protocol: Forbidden: needs the alpha Kubernetes feature H2CContainerProbe, " +
				"without which the apiserver drops it from the step's Deployment: remove it",
			"spec.steps[0].livenessProbe.grpc.mode: Forbidden: needs the alpha Kubernetes feature GRPCContainerProbeTLS, " +
				"without which the apiserver drops it from the step's Deployment: remove it",
		},
	}, {
		name: "numbers Kubernetes refuses",
		edit: func(s *pipelinev1.Step) {
			s.ReadinessProbe = httpProbe()
			s.ReadinessProbe.PeriodSeconds = -1
			s.ReadinessProbe.TerminationGracePeriodSeconds = ptr.To[int64](5)
			s.LivenessProbe = httpProbe()
			s.LivenessProbe.SuccessThreshold = 2
			s.LivenessProbe.TerminationGracePeriodSeconds = ptr.To[int64](0)
		},
		want: []string{
			"spec.steps[0].readinessProbe.periodSeconds: Invalid value: -1: must not be negative",
			"spec.steps[0].readinessProbe.terminationGracePeriodSeconds: Forbidden: a readinessProbe has none: a failed readiness probe does not stop the container",
			"spec.steps[0].livenessProbe.successThreshold: Invalid value: 2: must be 1 for a livenessProbe",
			"spec.steps[0].livenessProbe.terminationGracePeriodSeconds: Invalid value: 0: must be greater than zero",
		},
	}, {
		name: "a readinessProbe may need several successes",
		edit: func(s *pipelinev1.Step) {
			s.ReadinessProbe = httpProbe()
			s.ReadinessProbe.SuccessThreshold = 3
		},
	}, {
		name: "the operator's labels and keys",
		edit: func(s *pipelinev1.Step) {
			s.PodMetadata = &pipelinev1.StepPodMetadata{
				Labels: map[string]string{"pipeline": "other", "app.kubernetes.io/managed-by": "me", "distri-infer.ndsl.cn/tier": "gpu",
					"app.kubernetes.io/version": "2.1"},
				Annotations: map[string]string{"distri-infer.ndsl.cn/paused": "true", "prometheus.io/scrape": "true"},
			}
		},
		want: []string{
			"spec.steps[0].podMetadata.labels[app.kubernetes.io/managed-by]: Forbidden: label app.kubernetes.io/managed-by is the operator's: it selects and names the step's pods",
			"spec.steps[0].podMetadata.labels[distri-infer.ndsl.cn/tier]: Forbidden: label distri-infer.ndsl.cn/tier is under distri-infer.ndsl.cn/, whose keys are the operator's",
			"spec.steps[0].podMetadata.labels[pipeline]: Forbidden: label pipeline is the operator's: it selects and names the step's pods",
			"spec.steps[0].podMetadata.annotations[distri-infer.ndsl.cn/paused]: Forbidden: annotation distri-infer.ndsl.cn/paused is under distri-infer.ndsl.cn/, whose keys are the operator's",
		},
	}, {
		name: "keys and values that are no labels or annotations",
		edit: func(s *pipelinev1.Step) {
			s.PodMetadata = &pipelinev1.StepPodMetadata{
				Labels:      map[string]string{"team": "vision team", "-bad": "x"},
				Annotations: map[string]string{"has space": "x", "Example.com/Mixed-Case": "ok"},
			}
		},
		want: []string{
			`spec.steps[0].podMetadata.labels[-bad]: Invalid value: "-bad": not a valid label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`spec.steps[0].podMetadata.labels[team]: Invalid value: "vision team": not a valid label value: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
			`spec.steps[0].podMetadata.annotations[has space]: Invalid value: "has space": not a valid annotation key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		},
	}, {
		name: "annotations larger than an object's metadata holds",
		edit: func(s *pipelinev1.Step) {
			s.PodMetadata = &pipelinev1.StepPodMetadata{Annotations: map[string]string{}}
			for i := range 64 {
				s.PodMetadata.Annotations[fmt.Sprintf("example.com/a%d", i)] = strings.Repeat("v", 4096)
			}
		},
		want: []string{"spec.steps[0].podMetadata.annotations: Too long: may not be more than 262144 bytes"},
	}, {
		name: "shared memory of nothing, and of too much",
		edit: func(s *pipelinev1.Step) { s.SharedMemorySize = ptr.To(resource.MustParse("0")) },
		want: []string{`spec.steps[0].sharedMemorySize: Invalid value: "0": must be greater than zero and at most 64Gi, e.g. 1Gi`},
	}, {
		name: "shared memory over 64Gi",
		edit: func(s *pipelinev1.Step) { s.SharedMemorySize = ptr.To(resource.MustParse("65Gi")) },
		want: []string{`spec.steps[0].sharedMemorySize: Invalid value: "65Gi": must be greater than zero and at most 64Gi, e.g. 1Gi`},
	}, {
		name: "shared memory at 64Gi",
		edit: func(s *pipelinev1.Step) { s.SharedMemorySize = ptr.To(resource.MustParse("64Gi")) },
	}, {
		name: "pull Secrets that cannot be Secrets",
		edit: func(s *pipelinev1.Step) {
			s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}, {Name: "Registry_B"}, {}}
		},
		want: []string{
			`spec.steps[0].imagePullSecrets[1].name: Invalid value: "Registry_B": not a valid Secret name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`spec.steps[0].imagePullSecrets[2].name: Invalid value: "": not a valid Secret name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := sampleV1(t)
			tc.edit(&p.Spec.Steps[0])
			var got []string
			for _, err := range ValidatePipeline(p) {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// The same refusals through the apiserver: the schema's bounds of the new fields and the
// webhook's checks, in a request made in v1.
var _ = Describe("Model server fields of a step", func() {
	It("are admitted together, and refused with messages that name the field", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		p := sample(ns)
		p.Spec.Steps[0] = testenv.ModelServerStep(p.Spec.Steps[0])
		Expect(k8sClient.Create(ctx, p)).To(Succeed(), "a step with every field")

		p = sample(ns)
		p.Spec.Steps[1].ReadinessProbe = &corev1.Probe{}
		expectInvalid(k8sClient.Create(ctx, p), "spec.steps[1].readinessProbe", "a probe needs one handler: exec, httpGet, tcpSocket or grpc")

		p = sample(ns)
		p.Spec.Steps[0].LivenessProbe = httpProbe()
		p.Spec.Steps[0].LivenessProbe.HTTPGet.Port = intstr.FromString("grpc")
		expectInvalid(k8sClient.Create(ctx, p), "spec.steps[0].livenessProbe.httpGet.port",
			"must be a port number from 1 to 65535 or http, the name of the step container's port")

		p = sample(ns)
		p.Spec.Steps[0].PodMetadata = &pipelinev1.StepPodMetadata{Labels: map[string]string{"step": "9"}}
		expectInvalid(k8sClient.Create(ctx, p), "spec.steps[0].podMetadata.labels[step]", "label step is the operator's")

		p = sample(ns)
		p.Spec.Steps[0].SharedMemorySize = ptr.To(resource.MustParse("128Gi"))
		expectInvalid(k8sClient.Create(ctx, p), "spec.steps[0].sharedMemorySize", "must be greater than zero and at most 64Gi")

		p = sample(ns)
		p.Spec.Steps[0].RuntimeClassName = "Nvidia"
		expectInvalid(k8sClient.Create(ctx, p), "spec.steps[0].runtimeClassName", "should match")

		p = sample(ns)
		p.Spec.Steps[0].TerminationGracePeriodSeconds = ptr.To[int64](3601)
		expectInvalid(k8sClient.Create(ctx, p), "spec.steps[0].terminationGracePeriodSeconds", "should be less than or equal to 3600")
	})
})
