package admission

import (
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"

	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

// What the operator's identity may not create (config/policy/guard.yaml) is refused to step
// authors at admission, in the names of the version they wrote.
var _ = Describe("Step privileges", func() {
	It("refuses a privileged container and added capabilities, and accepts dropped ones", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		p := sample(ns)
		p.Spec.Steps[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		expectInvalid(k8sClient.Create(ctx, p), "spec.steps[0].securityContext.privileged",
			"the operator runs no privileged container: run such a workload outside a Pipeline")

		p = sample(ns)
		p.Spec.Steps[1].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{
			Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}}}
		expectInvalid(k8sClient.Create(ctx, p), "spec.steps[1].securityContext.capabilities.add",
			"the operator's containers add no capability")

		seed, err := samples.PipelineV1beta1(ns)
		Expect(err).NotTo(HaveOccurred())
		seed.Spec.Steps[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		expectInvalid(k8sClient.Create(ctx, seed), "spec.steps[0].securityContext.privileged", "no privileged container")

		p = sample(ns)
		p.Spec.Steps[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed(), "a step that drops every capability and is not privileged")
	})

	It("refuses what the Pod Security baseline level refuses, root, privilege escalation, the control plane's taints and probes of another host", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		p := sample(ns)
		p.Spec.Steps[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		expectInvalid(k8sClient.Create(ctx, p), "spec.steps[0].securityContext.seccompProfile.type", "never Unconfined")

		p = sample(ns)
		p.Spec.Steps[1].Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
		expectInvalid(k8sClient.Create(ctx, p), "spec.steps[1].tolerations[0].key",
			"the operator's pods do not tolerate the control plane's taint node-role.kubernetes.io/control-plane")

		seed, err := samples.PipelineV1beta1(ns)
		Expect(err).NotTo(HaveOccurred())
		seed.Spec.Steps[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}
		expectInvalid(k8sClient.Create(ctx, seed), "spec.steps[0].securityContext.runAsUser", "do not ask to run as root")

		p = sample(ns)
		p.Spec.Steps[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsNonRoot: ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			SELinuxOptions: &corev1.SELinuxOptions{Type: "container_t", Level: "s0:c1,c2"}}
		p.Spec.Steps[0].Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed(), "a step within the restricted level, tolerating a taint of its own")
	})
})

// Every field of a step the guard refuses the operator's identity is refused at its own path, and
// what the Pod Security baseline level admits stays admitted.
func TestValidateRefusesWhatTheGuardRefuses(t *testing.T) {
	unconfined := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
	for _, c := range []struct {
		name   string
		change func(*pipelinev1.Step)
		want   string // the error's start; empty when the step is admitted
	}{
		{"seccomp Unconfined", func(s *pipelinev1.Step) { s.SecurityContext = &corev1.SecurityContext{SeccompProfile: unconfined} },
			"spec.steps[0].securityContext.seccompProfile.type: Forbidden: the operator's containers run under a seccomp profile"},
		{"AppArmor Unconfined", func(s *pipelinev1.Step) {
			s.SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
		}, "spec.steps[0].securityContext.appArmorProfile.type: Forbidden: the operator's containers run under an AppArmor profile"},
		{"SELinux type spc_t", func(s *pipelinev1.Step) {
			s.SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}
		}, "spec.steps[0].securityContext.seLinuxOptions.type: Forbidden: the operator's containers take no SELinux type but container_t"},
		{"SELinux user", func(s *pipelinev1.Step) {
			s.SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{User: "system_u"}}
		}, "spec.steps[0].securityContext.seLinuxOptions.user: Forbidden"},
		{"SELinux role", func(s *pipelinev1.Step) {
			s.SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Role: "sysadm_r"}}
		}, "spec.steps[0].securityContext.seLinuxOptions.role: Forbidden"},
		{"allowPrivilegeEscalation", func(s *pipelinev1.Step) {
			s.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)}
		}, "spec.steps[0].securityContext.allowPrivilegeEscalation: Forbidden"},
		{"runAsUser 0", func(s *pipelinev1.Step) { s.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)} },
			"spec.steps[0].securityContext.runAsUser: Forbidden: the operator's containers do not ask to run as root"},
		{"runAsNonRoot false", func(s *pipelinev1.Step) { s.SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(false)} },
			"spec.steps[0].securityContext.runAsNonRoot: Forbidden"},
		{"procMount Unmasked", func(s *pipelinev1.Step) {
			s.SecurityContext = &corev1.SecurityContext{ProcMount: ptr.To(corev1.UnmaskedProcMount)}
		}, "spec.steps[0].securityContext.procMount: Forbidden"},
		{"the control plane's taint", func(s *pipelinev1.Step) {
			s.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}, "spec.steps[0].tolerations[0].key: Forbidden: the operator's pods do not tolerate the control plane's taint node-role.kubernetes.io/master"},
		{"an httpGet probe of another host", func(s *pipelinev1.Step) {
			s.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Port: intstr.FromInt32(80)}}}
		}, "spec.steps[0].livenessProbe.httpGet.host: Forbidden: the operator's probes name no host"},
		{"a tcpSocket probe of another host", func(s *pipelinev1.Step) {
			s.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "10.0.0.1", Port: intstr.FromInt32(2379)}}}
		}, "spec.steps[0].readinessProbe.tcpSocket.host: Forbidden: the operator's probes name no host"},
		{"an unconfined seccomp annotation", func(s *pipelinev1.Step) {
			s.PodMetadata = &pipelinev1.StepPodMetadata{Annotations: map[string]string{corev1.SeccompPodAnnotationKey: "unconfined"}}
		}, "spec.steps[0].podMetadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: Forbidden"},
		{"an unconfined AppArmor annotation", func(s *pipelinev1.Step) {
			s.PodMetadata = &pipelinev1.StepPodMetadata{Annotations: map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "step": "unconfined"}}
		}, "spec.steps[0].podMetadata.annotations[container.apparmor.security.beta.kubernetes.io/step]: Forbidden"},
		{"what the baseline level admits", func(s *pipelinev1.Step) {
			s.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), AllowPrivilegeEscalation: ptr.To(false),
				ProcMount: ptr.To(corev1.DefaultProcMount), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault},
				SELinuxOptions:  &corev1.SELinuxOptions{Type: "container_init_t", Level: "s0:c1,c2"}}
			s.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
			s.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(80)}}}
			s.PodMetadata = &pipelinev1.StepPodMetadata{Annotations: map[string]string{
				corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "step": "runtime/default"}}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := sampleV1(t)
			c.change(&p.Spec.Steps[0])
			var got []string
			for _, e := range ValidatePipeline(p) {
				got = append(got, e.Error())
			}
			if c.want == "" {
				if len(got) > 0 {
					t.Fatalf("errors %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
				t.Fatalf("errors %q, want one that starts %q", got, c.want)
			}
		})
	}
}
