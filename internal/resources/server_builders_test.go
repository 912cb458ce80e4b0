package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The fields a model server needs reach the step's pod and container as the step writes them;
// a step that sets none of them keeps the pod it had (TestSampleStepChildrenAreUnchanged).
func TestStepDeploymentModelServerFields(t *testing.T) {
	probe := func(h corev1.ProbeHandler) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: h, InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 30}
	}
	httpGet := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/v2/health/ready", Port: intstr.FromString(StepPortName),
		HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "1"}}}}
	tcp := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9080)}}
	grpc := corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 8001, Service: ptr.To("inference.GRPCInferenceService")}}
	exec := corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"curl", "-f", "localhost:8000/v2/health/live"}}}
	modelMount := corev1.VolumeMount{Name: ModelVolumeName, MountPath: "/models", ReadOnly: true}

	for _, tc := range []struct {
		name  string
		step  func(s *pipelinev1.Step)
		check func(t *testing.T, d *appsv1.Deployment)
	}{{
		name: "none: the image's entrypoint, no probes, the pod as before",
		step: func(*pipelinev1.Step) {},
		check: func(t *testing.T, d *appsv1.Deployment) {
			pod, c := d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0]
			if c.Command != nil || c.Args != nil || c.ReadinessProbe != nil || c.LivenessProbe != nil || c.StartupProbe != nil {
				t.Errorf("container %+v", c)
			}
			if pod.RuntimeClassName != nil || pod.ImagePullSecrets != nil || pod.TerminationGracePeriodSeconds != nil || len(pod.Volumes) != 1 {
				t.Errorf("pod %+v", pod)
			}
			if diff := cmp.Diff(d.Labels, d.Spec.Template.Labels); diff != "" || d.Spec.Template.Annotations != nil {
				t.Errorf("pod labels differ from the operator's (-want +got):\n%s; annotations %v", diff, d.Spec.Template.Annotations)
			}
		},
	}, {
		name: "command",
		step: func(s *pipelinev1.Step) { s.Command = []string{"tritonserver", "--model-repository=$(MODEL_PATH)"} },
		check: func(t *testing.T, d *appsv1.Deployment) {
			c := d.Spec.Template.Spec.Containers[0]
			if diff := cmp.Diff([]string{"tritonserver", "--model-repository=$(MODEL_PATH)"}, c.Command); diff != "" || c.Args != nil {
				t.Errorf("command (-want +got):\n%s; args %q", diff, c.Args)
			}
		},
	}, {
		name: "args: the container's arguments, the image's entrypoint",
		step: func(s *pipelinev1.Step) { s.Args = []string{"--port", "8080"} },
		check: func(t *testing.T, d *appsv1.Deployment) {
			c := d.Spec.Template.Spec.Containers[0]
			if diff := cmp.Diff([]string{"--port", "8080"}, c.Args); diff != "" || c.Command != nil {
				t.Errorf("args (-want +got):\n%s; command %q", diff, c.Command)
			}
		},
	}, {
		name: "readinessProbe by the port's name",
		step: func(s *pipelinev1.Step) { s.ReadinessProbe = probe(httpGet) },
		check: func(t *testing.T, d *appsv1.Deployment) {
			c := d.Spec.Template.Spec.Containers[0]
			if diff := cmp.Diff(probe(httpGet), c.ReadinessProbe); diff != "" || c.LivenessProbe != nil || c.StartupProbe != nil {
				t.Errorf("readiness probe (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "livenessProbe by number",
		step: func(s *pipelinev1.Step) { s.LivenessProbe = probe(tcp) },
		check: func(t *testing.T, d *appsv1.Deployment) {
			c := d.Spec.Template.Spec.Containers[0]
			if diff := cmp.Diff(probe(tcp), c.LivenessProbe); diff != "" || c.ReadinessProbe != nil || c.StartupProbe != nil {
				t.Errorf("liveness probe (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "startupProbe, exec",
		step: func(s *pipelinev1.Step) { s.StartupProbe = probe(exec) },
		check: func(t *testing.T, d *appsv1.Deployment) {
			c := d.Spec.Template.Spec.Containers[0]
			if diff := cmp.Diff(probe(exec), c.StartupProbe); diff != "" || c.ReadinessProbe != nil || c.LivenessProbe != nil {
				t.Errorf("startup probe (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "grpc probe with a termination grace period of its own",
		step: func(s *pipelinev1.Step) {
			s.LivenessProbe = probe(grpc)
			s.LivenessProbe.TerminationGracePeriodSeconds = ptr.To[int64](10)
		},
		check: func(t *testing.T, d *appsv1.Deployment) {
			want := probe(grpc)
			want.TerminationGracePeriodSeconds = ptr.To[int64](10)
			if diff := cmp.Diff(want, d.Spec.Template.Spec.Containers[0].LivenessProbe); diff != "" {
				t.Errorf("liveness probe (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "podMetadata: on the pod template only, the operator's labels win",
		step: func(s *pipelinev1.Step) {
			s.PodMetadata = &pipelinev1.StepPodMetadata{
				Labels: map[string]string{"team": "vision", "pipeline": "other", "app.kubernetes.io/name": "x",
					"distri-infer.ndsl.cn/pipeline-namespace": "x", "distri-infer.ndsl.cn/mine": "x", "app.kubernetes.io/version": "2"},
				Annotations: map[string]string{"prometheus.io/scrape": "true", "distri-infer.ndsl.cn/router-config-hash": "x"},
			}
		},
		check: func(t *testing.T, d *appsv1.Deployment) {
			want := map[string]string{"team": "vision", "app.kubernetes.io/version": "2"}
			for k, v := range d.Labels {
				want[k] = v
			}
			if diff := cmp.Diff(want, d.Spec.Template.Labels); diff != "" {
				t.Errorf("pod labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"prometheus.io/scrape": "true"}, d.Spec.Template.Annotations); diff != "" {
				t.Errorf("pod annotations (-want +got):\n%s", diff)
			}
			if _, ok := d.Labels["team"]; ok || d.Annotations != nil {
				t.Errorf("the Deployment itself got the pod metadata: %v %v", d.Labels, d.Annotations)
			}
		},
	}, {
		name: "podMetadata with annotations only",
		step: func(s *pipelinev1.Step) {
			s.PodMetadata = &pipelinev1.StepPodMetadata{Annotations: map[string]string{"sidecar.istio.io/inject": "false"}}
		},
		check: func(t *testing.T, d *appsv1.Deployment) {
			if diff := cmp.Diff(d.Labels, d.Spec.Template.Labels); diff != "" {
				t.Errorf("pod labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"sidecar.istio.io/inject": "false"}, d.Spec.Template.Annotations); diff != "" {
				t.Errorf("pod annotations (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "runtimeClassName",
		step: func(s *pipelinev1.Step) { s.RuntimeClassName = "nvidia" },
		check: func(t *testing.T, d *appsv1.Deployment) {
			if got := d.Spec.Template.Spec.RuntimeClassName; got == nil || *got != "nvidia" {
				t.Errorf("runtimeClassName %v", got)
			}
		},
	}, {
		name: "sharedMemorySize: a memory-backed emptyDir at /dev/shm, besides the model volume",
		step: func(s *pipelinev1.Step) { s.SharedMemorySize = ptr.To(resource.MustParse("2Gi")) },
		check: func(t *testing.T, d *appsv1.Deployment) {
			pod := d.Spec.Template.Spec
			size := resource.MustParse("2Gi")
			wantVolumes := []corev1.Volume{
				{Name: ModelVolumeName, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: ClaimName(testenv.Sample(t, "vision")), ReadOnly: true}}},
				{Name: SharedMemoryVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					Medium: corev1.StorageMediumMemory, SizeLimit: &size}}},
			}
			if diff := cmp.Diff(wantVolumes, pod.Volumes); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
			wantMounts := []corev1.VolumeMount{modelMount, {Name: SharedMemoryVolumeName, MountPath: "/dev/shm"}}
			if diff := cmp.Diff(wantMounts, pod.Containers[0].VolumeMounts); diff != "" {
				t.Errorf("volume mounts (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "imagePullSecrets",
		step: func(s *pipelinev1.Step) {
			s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry-a"}, {Name: "registry-b"}}
		},
		check: func(t *testing.T, d *appsv1.Deployment) {
			want := []corev1.LocalObjectReference{{Name: "registry-a"}, {Name: "registry-b"}}
			if diff := cmp.Diff(want, d.Spec.Template.Spec.ImagePullSecrets); diff != "" {
				t.Errorf("imagePullSecrets (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "terminationGracePeriodSeconds",
		step: func(s *pipelinev1.Step) { s.TerminationGracePeriodSeconds = ptr.To[int64](120) },
		check: func(t *testing.T, d *appsv1.Deployment) {
			if got := d.Spec.Template.Spec.TerminationGracePeriodSeconds; got == nil || *got != 120 {
				t.Errorf("terminationGracePeriodSeconds %v", got)
			}
		},
	}, {
		name: "terminationGracePeriodSeconds 0 is written, not left to the default",
		step: func(s *pipelinev1.Step) { s.TerminationGracePeriodSeconds = ptr.To[int64](0) },
		check: func(t *testing.T, d *appsv1.Deployment) {
			if got := d.Spec.Template.Spec.TerminationGracePeriodSeconds; got == nil || *got != 0 {
				t.Errorf("terminationGracePeriodSeconds %v", got)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := testenv.Sample(t, "vision")
			tc.step(&p.Spec.Steps[0])
			d := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 0, "", "", ""))
			tc.check(t, d)
			// The rest of the container is what it was.
			c := d.Spec.Template.Spec.Containers[0]
			if c.Name != containerName || c.Image != "nginx:latest" || len(c.Ports) != 1 || c.Ports[0].Name != StepPortName ||
				!cmp.Equal(c.VolumeMounts[0], modelMount) || len(c.Env) != 7 {
				t.Errorf("container %+v", c)
			}
		})
	}
}

// A step with every field builds a pod the restricted Pod Security level admits as before: the
// shared memory is an emptyDir, a volume type every level allows.
func TestStepDeploymentWithEveryModelServerField(t *testing.T) {
	p := testenv.Sample(t, "vision")
	p.Spec.Steps[1] = testenv.ModelServerStep(p.Spec.Steps[1])
	d := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 1, PodSecurityRestricted, "", ""))
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Command[0] != "tritonserver" || c.Args[0] != "--model-repository=$(MODEL_PATH)" || c.ReadinessProbe == nil ||
		c.LivenessProbe == nil || c.StartupProbe == nil || ptr.Deref(pod.RuntimeClassName, "") != "nvidia" ||
		len(pod.ImagePullSecrets) != 1 || ptr.Deref(pod.TerminationGracePeriodSeconds, 0) != 120 ||
		d.Spec.Template.Labels["team"] != "vision" || d.Spec.Template.Annotations["prometheus.io/port"] != "8002" {
		t.Errorf("pod %+v", d.Spec.Template)
	}
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim == nil && v.EmptyDir == nil {
			t.Errorf("volume %s is neither a claim nor an emptyDir", v.Name)
		}
	}
	if c.SecurityContext == nil || !ptr.Deref(c.SecurityContext.RunAsNonRoot, false) {
		t.Errorf("security context %+v: the restricted defaults are gone", c.SecurityContext)
	}
}
