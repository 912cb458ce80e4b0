package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestNamespacePodSecurity(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   PodSecurityLevel
	}{
		{nil, ""},
		{map[string]string{"pod-security.kubernetes.io/warn": "restricted"}, ""},
		{map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}, "baseline"},
		{map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}, PodSecurityRestricted},
	} {
		if got := NamespacePodSecurity(tc.labels); got != tc.want {
			t.Errorf("namespacePodSecurity(%v) = %q, want %q", tc.labels, got, tc.want)
		}
	}
}

func TestStepSecurityContext(t *testing.T) {
	user := &corev1.SecurityContext{
		RunAsUser:                ptr.To[int64](1000),
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
	}
	for _, tc := range []struct {
		name  string
		level PodSecurityLevel
		step  func(*pipelinev1.Step)
		want  *corev1.SecurityContext
	}{{
		name:  "no level: root images keep working",
		level: "",
		want:  &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)},
	}, {
		name:  "baseline",
		level: "baseline",
		want:  &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)},
	}, {
		name:  "restricted: non-root, no capabilities",
		level: PodSecurityRestricted,
		want: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}, {
		name:  "the step's own replaces the defaults",
		level: "",
		step:  func(s *pipelinev1.Step) { s.SecurityContext = user.DeepCopy() },
		want:  user,
	}, {
		name:  "the step's own replaces the restricted defaults too",
		level: PodSecurityRestricted,
		step: func(s *pipelinev1.Step) {
			s.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}
		},
		want: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)},
	}, {
		// The pod keeps RuntimeDefault; the container's own profile takes precedence over it,
		// and the namespace's Pod Security level judges it.
		name:  "the step's own seccomp profile is the container's",
		level: "",
		step: func(s *pipelinev1.Step) {
			s.SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		},
		want: &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := testenv.Sample(t, "default")
			if tc.step != nil {
				tc.step(&p.Spec.Steps[0])
			}
			d := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 0, tc.level, "", ""))
			pod := d.Spec.Template.Spec
			wantPod := &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			if diff := cmp.Diff(wantPod, pod.SecurityContext); diff != "" {
				t.Errorf("pod security context (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, pod.Containers[0].SecurityContext); diff != "" {
				t.Errorf("container security context (-want +got):\n%s", diff)
			}
		})
	}
}
