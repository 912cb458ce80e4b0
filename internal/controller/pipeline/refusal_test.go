package pipeline

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// freezeImages makes the apiserver refuse, in namespace ns, every update of a Deployment that
// changes a container's image, as a cluster's change-freeze policy would. It returns once the
// policy is in force, and removes it when the test ends.
func freezeImages(ctx context.Context, ns string, d *appsv1.Deployment) {
	GinkgoHelper()
	name := "freeze-images-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
						Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object.spec.template.spec.containers.all(c, oldObject.spec.template.spec.containers" +
					".exists(o, o.name == c.name && o.image == c.image))",
				Message: "images are frozen during the change freeze",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, binding))).To(Succeed())
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, policy))).To(Succeed())
	})
	By("waiting until the apiserver enforces the policy (a dry-run image change is refused)")
	Eventually(func() bool {
		probe := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), probe)).To(Succeed())
		probe.Spec.Template.Spec.Containers[0].Image = "probe:frozen"
		return apierrors.IsInvalid(k8sClient.Update(ctx, probe, client.DryRunAll))
	}).Should(BeTrue())
}

// warnings are the Warning events recorded on p, by reason.
func warnings(ctx context.Context, p *pipelinev1beta1.Pipeline) func() map[string]int {
	return func() map[string]int {
		list := &eventsv1.EventList{}
		Expect(k8sClient.List(ctx, list, client.InNamespace(p.Namespace))).To(Succeed())
		out := map[string]int{}
		for _, e := range list.Items {
			if e.Type == "Warning" && e.Regarding.Kind == "Pipeline" && e.Regarding.Name == p.Name {
				out[e.Reason]++
				if e.Series != nil {
					out[e.Reason] += int(e.Series.Count) - 1
				}
			}
		}
		return out
	}
}

var _ = Describe("A child write the apiserver keeps refusing", func() {
	It("degrades the Pipeline with the apiserver's message, describes the child as it is, and records one event", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		p := runningSample(ctx, ns)
		d := deploymentOf(ctx, p, 1)
		freezeImages(ctx, ns, d)

		By("changing the second step's image, which the policy refuses")
		updatePipeline(ctx, p, func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[1].Image = "nginx:1.27" })

		Eventually(condition(ctx, p, pipelinev1beta1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", pipelinev1beta1.ReasonApplyRefused),
			HaveField("Message", And(
				ContainSubstring("step 2 (step-2)"),
				ContainSubstring("the apiserver refuses the update of Deployment "+d.Name),
				ContainSubstring("images are frozen during the change freeze")))))
		Expect(phase(ctx, p)()).To(Equal(pipelinev1beta1.PipelinePhaseFailed), "kubectl get pipelines shows it")
		Expect(condition(ctx, p, pipelinev1beta1.ConditionReconciled)()).To(HaveField("Reason", pipelinev1beta1.ReasonApplyRefused))

		By("the Deployment exists and serves the old image: the status says so, not that it is missing")
		Expect(deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image).To(Equal(d.Spec.Template.Spec.Containers[0].Image))
		got := getPipeline(ctx, p)
		Expect(got.Status.DetailPhase.StepsPhase[1].DeploymentPhase).To(Equal(pipelinev1beta1.DeploymentPhaseAvailable))
		for _, t := range []string{pipelinev1beta1.ConditionAvailable, pipelinev1beta1.ConditionProgressing} {
			Expect(condition(ctx, p, t)()).To(HaveField("Message", Not(ContainSubstring("does not exist yet"))), t)
		}

		By("the passes retry with back-off, and the refusal is one Warning event, not one per pass")
		Consistently(warnings(ctx, p), "3s").Should(And(
			HaveKeyWithValue(pipelinev1beta1.ReasonApplyRefused, 1),
			Not(HaveKey(pipelinev1beta1.ReasonApplyFailed))))

		By("once the freeze is lifted, the change goes through and the Pipeline recovers")
		Expect(k8sClient.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "freeze-images-" + ns}})).To(Succeed())
		Eventually(func() string {
			return deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image
		}, "90s").Should(Equal("nginx:1.27"))
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1beta1.PipelinePhaseRunning))
		Expect(condition(ctx, p, pipelinev1beta1.ConditionDegraded)()).To(HaveField("Status", metav1.ConditionFalse))
		Expect(resources.StepObjectName(p, 1)).To(Equal(d.Name))
	})
})
