package pipeline

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// namespaceEnforcing creates a namespace of the test's own whose pods the PodSecurity
// admission controller holds to level (no label for an empty level).
func namespaceEnforcing(ctx context.Context, level resources.PodSecurityLevel) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "pod-security-test-"}}
	if level != "" {
		ns.Labels = map[string]string{resources.LabelPodSecurityEnforce: string(level)}
	}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// admitPod asks the apiserver, without storing anything, to create a pod of template in ns:
// the PodSecurity admission controller judges it as it would a pod of the Deployment.
func admitPod(ctx context.Context, ns string, template corev1.PodTemplateSpec) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "step-", Namespace: ns, Labels: template.Labels},
		Spec:       template.Spec,
	}
	return k8sClient.Create(ctx, pod, client.DryRunAll)
}

// stepTemplate is the pod template the operator builds for step i of p at level.
func stepTemplate(p *pipelinev1.Pipeline, i int, level resources.PodSecurityLevel) corev1.PodTemplateSpec {
	GinkgoHelper()
	return testenv.Typed[appsv1.Deployment](GinkgoT(), resources.StepDeployment(p, i, level, "", "")).Spec.Template
}

var _ = Describe("Pod Security of the step pods", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	It("admits the default pod of a root image (nginx) at the baseline level, and not at restricted", func() {
		baseline, restricted := namespaceEnforcing(ctx, "baseline"), namespaceEnforcing(ctx, resources.PodSecurityRestricted)
		p := testenv.Sample(GinkgoT(), baseline)
		Expect(admitPod(ctx, baseline, stepTemplate(p, 0, ""))).To(Succeed())

		err := admitPod(ctx, restricted, stepTemplate(p, 0, ""))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the restricted level refuses a pod that may run as root: %v", err)
		Expect(err.Error()).To(ContainSubstring("violates PodSecurity \"restricted"))
	})

	It("admits the router's pod at the restricted level, whatever the namespace enforces", func() {
		restricted := namespaceEnforcing(ctx, resources.PodSecurityRestricted)
		p := testenv.RoutedSample(GinkgoT())
		p.Namespace = restricted
		template := testenv.Typed[appsv1.Deployment](GinkgoT(), resources.RouterDeployment(p, testenv.RouterImage, "{}", "")).Spec.Template
		Expect(admitPod(ctx, restricted, template)).To(Succeed())
	})

	It("admits the pod built for a namespace enforcing restricted there", func() {
		restricted := namespaceEnforcing(ctx, resources.PodSecurityRestricted)
		p := testenv.Sample(GinkgoT(), restricted)
		for i := range p.Spec.Steps {
			Expect(admitPod(ctx, restricted, stepTemplate(p, i, resources.PodSecurityRestricted))).To(Succeed())
		}
	})

	It("uses the step's own securityContext instead of its defaults", func() {
		restricted := namespaceEnforcing(ctx, resources.PodSecurityRestricted)
		p := testenv.Sample(GinkgoT(), restricted)
		p.Spec.Steps[0].SecurityContext = &corev1.SecurityContext{
			RunAsUser:                ptr.To[int64](101),
			RunAsNonRoot:             ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
		}
		Expect(admitPod(ctx, restricted, stepTemplate(p, 0, resources.PodSecurityRestricted))).To(Succeed())

		By("refusing a step whose own securityContext asks for more than the level allows")
		p.Spec.Steps[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		err := admitPod(ctx, restricted, stepTemplate(p, 0, resources.PodSecurityRestricted))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a privileged container is not admitted: %v", err)

		By("refusing, at restricted, a step whose own securityContext lets it run as root")
		p.Spec.Steps[0].SecurityContext = &corev1.SecurityContext{
			RunAsUser:                ptr.To[int64](0),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
		err = admitPod(ctx, restricted, stepTemplate(p, 0, resources.PodSecurityRestricted))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a container that may run as root is not admitted: %v", err)

		By("refusing, at baseline, a step whose own seccomp profile is Unconfined: it takes precedence over the pod's")
		baseline := namespaceEnforcing(ctx, "baseline")
		p.Namespace = baseline
		p.Spec.Steps[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		template := stepTemplate(p, 0, "")
		Expect(template.Spec.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
		err = admitPod(ctx, baseline, template)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "an Unconfined container is not admitted: %v", err)
		Expect(err.Error()).To(ContainSubstring("seccompProfile"))
	})

	It("follows the level of the Pipeline's namespace, and its changes", func() {
		ns := namespaceEnforcing(ctx, "")
		p := createSample(ctx, ns)
		Eventually(func(g Gomega) {
			c := deploymentOf(ctx, p, 0).Spec.Template.Spec.Containers[0]
			g.Expect(c.SecurityContext).To(Equal(&corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}))
		}).Should(Succeed())
		pod := deploymentOf(ctx, p, 0).Spec.Template.Spec
		Expect(pod.SecurityContext.SeccompProfile).To(Equal(&corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}))

		By("enforcing restricted on the namespace")
		namespace := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, namespace)).To(Succeed())
		namespace.Labels[resources.LabelPodSecurityEnforce] = string(resources.PodSecurityRestricted)
		Expect(k8sClient.Update(ctx, namespace)).To(Succeed())

		for i := range p.Spec.Steps {
			Eventually(func(g Gomega) {
				c := deploymentOf(ctx, p, i).Spec.Template.Spec.Containers[0]
				g.Expect(c.SecurityContext.RunAsNonRoot).To(Equal(ptr.To(true)))
				g.Expect(c.SecurityContext.Capabilities).To(Equal(&corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}))
			}).Should(Succeed())
			By("admitting a pod of the Deployment as the apiserver stores it")
			Expect(admitPod(ctx, ns, deploymentOf(ctx, p, i).Spec.Template)).To(Succeed())
		}

		By("returning to the defaults when the level is lifted")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, namespace)).To(Succeed())
		namespace.Labels[resources.LabelPodSecurityEnforce] = "baseline"
		Expect(k8sClient.Update(ctx, namespace)).To(Succeed())
		Eventually(func() *corev1.SecurityContext {
			return deploymentOf(ctx, p, 0).Spec.Template.Spec.Containers[0].SecurityContext
		}).Should(Equal(&corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}))
	})

	It("creates the Deployments of a Pipeline in a restricted namespace ready for that level at once", func() {
		ns := namespaceEnforcing(ctx, resources.PodSecurityRestricted)
		p := createSample(ctx, ns)
		Eventually(func(g Gomega) {
			g.Expect(deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].SecurityContext.RunAsNonRoot).To(Equal(ptr.To(true)))
		}).Should(Succeed())
		Expect(admitPod(ctx, ns, deploymentOf(ctx, p, 1).Spec.Template)).To(Succeed())
	})
})
