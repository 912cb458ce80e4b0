package admission

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

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
})
