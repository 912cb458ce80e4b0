package pipeline

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// refuse makes the apiserver refuse, in namespace ns, every op of a resource (apps/v1
// deployments or v1 services) for which expression is false, with message, as a cluster's
// admission policy would. It returns a function that lifts the policy; the policy goes when the
// test ends in any case.
func refuse(ctx context.Context, ns, resource string, op admissionregistrationv1.OperationType, expression, message string) func() {
	GinkgoHelper()
	name := "refuse-" + resource + "-" + ns
	group := ""
	if resource == "deployments" {
		group = "apps"
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{op},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	lift := func() {
		Expect(client.IgnoreNotFound(k8sClient.Delete(context.Background(), binding))).To(Succeed())
		Expect(client.IgnoreNotFound(k8sClient.Delete(context.Background(), policy))).To(Succeed())
	}
	DeferCleanup(lift)
	return lift
}

// freezeImages makes the apiserver refuse, in namespace ns, every update of a Deployment that
// changes a container's image, as a cluster's change-freeze policy would. It returns once the
// policy is in force (a dry-run image change of d is refused), and a function that lifts it.
func freezeImages(ctx context.Context, ns string, d *appsv1.Deployment) func() {
	GinkgoHelper()
	lift := refuse(ctx, ns, "deployments", admissionregistrationv1.Update,
		"object.spec.template.spec.containers.all(c, oldObject.spec.template.spec.containers"+
			".exists(o, o.name == c.name && o.image == c.image))",
		"images are frozen during the change freeze")
	Eventually(func() bool {
		probe := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), probe)).To(Succeed())
		probe.Spec.Template.Spec.Containers[0].Image = "probe:frozen"
		return apierrors.IsInvalid(k8sClient.Update(ctx, probe, client.DryRunAll))
	}).Should(BeTrue())
	return lift
}

// warnings are the Warning events recorded on p, by reason.
func warnings(ctx context.Context, p *pipelinev1.Pipeline) func() map[string]int {
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
		lift := freezeImages(ctx, ns, d)

		By("changing the second step's image, which the policy refuses")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Image = "nginx:1.27" })

		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", pipelinev1.ReasonApplyRefused),
			HaveField("Message", And(
				ContainSubstring("step 2 (step-2)"),
				ContainSubstring("the apiserver refuses the update of Deployment "+d.Name),
				ContainSubstring("images are frozen during the change freeze")))))
		Expect(phase(ctx, p)()).To(Equal(pipelinev1.PipelinePhaseFailed), "kubectl get pipelines shows it")
		Expect(condition(ctx, p, pipelinev1.ConditionReconciled)()).To(HaveField("Reason", pipelinev1.ReasonApplyRefused))

		By("the Deployment exists and serves the old image: the status says so, not that it is missing")
		Expect(deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image).To(Equal(d.Spec.Template.Spec.Containers[0].Image))
		got := getPipeline(ctx, p)
		Expect(got.Status.Steps[1].DeploymentState).To(Equal(pipelinev1.DeploymentStateAvailable))
		for _, t := range []string{pipelinev1.ConditionAvailable, pipelinev1.ConditionProgressing} {
			Expect(condition(ctx, p, t)()).To(HaveField("Message", Not(ContainSubstring("does not exist yet"))), t)
		}

		By("the passes retry with back-off, and the refusal is one Warning event, not one per pass")
		refused := func() float64 {
			return gathered(metrics.MetricReconcileErrors, map[string]string{"reason": pipelinev1.ReasonApplyRefused})
		}
		before := refused()
		Expect(before).To(BeNumerically(">=", 1), "the refused passes are counted")
		Consistently(warnings(ctx, p), "3s").Should(And(
			HaveKeyWithValue(pipelinev1.ReasonApplyRefused, 1),
			Not(HaveKey(pipelinev1.ReasonApplyFailed))))
		// The controller's limiter waits 5 ms after the first failure and twice as long after
		// each next one: at most about 10 refused passes fit in 3 seconds, where passes retried
		// without waiting make hundreds.
		Expect(refused()-before).To(BeNumerically("<=", 12), "refused passes in 3 seconds")

		By("once the freeze is lifted, the change goes through and the Pipeline recovers")
		lift()
		Eventually(func() string {
			return deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image
		}, "90s").Should(Equal("nginx:1.27"))
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(condition(ctx, p, pipelinev1.ConditionDegraded)()).To(HaveField("Status", metav1.ConditionFalse))
		Expect(resources.StepObjectName(p, 1)).To(Equal(d.Name))
	})
})

var _ = Describe("Children the spec no longer names", func() {
	It("are removed only after a pass that wrote every current child", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		p := runningSample(ctx, ns)
		old := resources.StepObjectName(p, 1)

		By("the apiserver refuses the Service of the step's new name")
		renamed := p.Name + "-renamed"
		lift := refuse(ctx, ns, "services", admissionregistrationv1.Create,
			"object.metadata.name != '"+renamed+"'", "no Service of that name here")
		Eventually(func() error {
			probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: renamed, Namespace: ns},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
			if err := k8sClient.Create(ctx, probe, client.DryRunAll); !apierrors.IsInvalid(err) {
				return fmt.Errorf("the policy is not in force yet: %v", err)
			}
			return nil
		}).Should(Succeed())

		By("renaming the step: its new Deployment is made, its new Service refused")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Name = "renamed" })
		Eventually(func() bool { return gone(ctx, &appsv1.Deployment{}, ns, renamed) }).Should(BeFalse())
		Eventually(condition(ctx, p, pipelinev1.ConditionReconciled)).Should(
			HaveField("Message", ContainSubstring("Service "+renamed)))

		By("the old step's Deployment and Service stay while a current child is missing")
		Consistently(func() bool {
			return !gone(ctx, &appsv1.Deployment{}, ns, old) && !gone(ctx, &corev1.Service{}, ns, old)
		}, "3s").Should(BeTrue())

		By("once the Service is made, the old children go")
		lift()
		Eventually(func() bool { return gone(ctx, &corev1.Service{}, ns, renamed) }, "90s").Should(BeFalse())
		Eventually(func() bool {
			return gone(ctx, &appsv1.Deployment{}, ns, old) && gone(ctx, &corev1.Service{}, ns, old)
		}).Should(BeTrue())
	})
})
