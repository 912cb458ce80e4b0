package pipeline

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// policyOf waits for the NetworkPolicy of the inner steps of p and returns it.
func policyOf(ctx context.Context, p *pipelinev1.Pipeline) *networkingv1.NetworkPolicy {
	GinkgoHelper()
	return child(ctx, &networkingv1.NetworkPolicy{}, p.Namespace, resources.StepsNetworkPolicyName(p))
}

// noPolicy reports whether p has no NetworkPolicy of its inner steps (or only one being deleted).
func noPolicy(ctx context.Context, p *pipelinev1.Pipeline) func() bool {
	return func() bool {
		return gone(ctx, &networkingv1.NetworkPolicy{}, p.Namespace, resources.StepsNetworkPolicyName(p))
	}
}

// policySpec is the NetworkPolicy spec the steps of Pipeline name need: isolate the pods
// selected by matchLabels (and, in mode Chain, not the entry's), admit from callers on ports.
func policySpec(name string, chain bool, callers map[string]string, ports ...int32) networkingv1.NetworkPolicySpec {
	selected := metav1.LabelSelector{MatchLabels: stepPodLabels(name)}
	if chain {
		selected.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "step", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"1"}}}
	}
	var tcp []networkingv1.NetworkPolicyPort
	for _, p := range ports {
		tcp = append(tcp, networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(p))})
	}
	return networkingv1.NetworkPolicySpec{
		PodSelector: selected,
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: callers}}},
			Ports: tcp,
		}},
	}
}

// stepPodLabels are the labels every step pod of Pipeline name carries, and only those.
func stepPodLabels(name string) map[string]string {
	return map[string]string{"pipeline": name, "app.kubernetes.io/name": "pipeline-step", "app.kubernetes.io/managed-by": "pipeline-operator"}
}

// routerPodLabels select the router pods of Pipeline name.
func routerPodLabels(name string) map[string]string {
	return map[string]string{"pipeline": name, "app.kubernetes.io/component": "router", "app.kubernetes.io/name": "pipeline-router"}
}

var _ = Describe("The NetworkPolicy of the steps", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("admits to a chain's steps after the first only the chain's own steps, and is put back when edited or deleted", func() {
		p := createSample(ctx, ns)
		chain := policySpec(p.Name, true, stepPodLabels(p.Name), 80)

		By("creating one policy owned by the Pipeline, on the second step's port")
		np := policyOf(ctx, p)
		Expect(np.Name).To(Equal("facedetection-pipeline-steps"))
		Expect(metav1.IsControlledBy(np, getPipeline(ctx, p))).To(BeTrue())
		Expect(np.Labels).To(And(HaveKeyWithValue(resources.LabelManagedBy, resources.ManagedBy), HaveKeyWithValue(resources.LabelPipeline, p.Name),
			HaveKeyWithValue(resources.LabelComponent, "network-policy")))
		Expect(np.Spec).To(Equal(chain))

		By("undoing an edit that admits every namespace")
		np.Spec.Ingress[0].From = append(np.Spec.Ingress[0].From, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})
		np.Spec.PodSelector.MatchExpressions = nil
		Expect(k8sClient.Update(ctx, np, client.FieldOwner("kubectl-edit"))).To(Succeed())
		Eventually(func() networkingv1.NetworkPolicySpec { return policyOf(ctx, p).Spec }).Should(Equal(chain))
		Eventually(eventNotes(ctx, p)).Should(ContainElement("Updated: Updated NetworkPolicy " + np.Name))

		By("making it again when it is deleted")
		Expect(k8sClient.Delete(ctx, np)).To(Succeed())
		Eventually(func() types.UID { return policyOf(ctx, p).UID }).ShouldNot(Equal(np.UID))
		Expect(policyOf(ctx, p).Spec).To(Equal(chain))
		Eventually(eventNotes(ctx, p)).Should(ContainElement("Created: Created NetworkPolicy " + np.Name))

		By("following the ports of the steps after the first")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			third := *p.Spec.Steps[1].DeepCopy()
			third.Name, third.Port = "step-3", ptr.To[int32](9090)
			p.Spec.Steps = append(p.Spec.Steps, third)
		})
		Eventually(func() networkingv1.NetworkPolicySpec { return policyOf(ctx, p).Spec }).
			Should(Equal(policySpec(p.Name, true, stepPodLabels(p.Name), 80, 9090)))
	})

	It("admits to every step only the router with dataPath.mode Router, and only the steps again in mode Chain", func() {
		p := createSample(ctx, ns, withRouter)
		routed := policySpec(p.Name, false, routerPodLabels(p.Name), 80, 9080)
		Eventually(func() networkingv1.NetworkPolicySpec { return policyOf(ctx, p).Spec }).Should(Equal(routed))
		Expect(routerDeploymentOf(ctx, p).Spec.Selector.MatchLabels).To(Equal(routerPodLabels(p.Name)),
			"the policy admits exactly the router's pods")

		updatePipeline(ctx, p, withoutRouter)
		Eventually(func() networkingv1.NetworkPolicySpec { return policyOf(ctx, p).Spec }).
			Should(Equal(policySpec(p.Name, true, stepPodLabels(p.Name), 80)))
	})

	It("is deleted once the Pipeline is a single step, and made for no single-step chain", func() {
		p := createSample(ctx, ns)
		uid := policyOf(ctx, p).UID

		By("removing the second step")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps = p.Spec.Steps[:1] })
		Eventually(noPolicy(ctx, p)).Should(BeTrue())
		Eventually(eventNotes(ctx, p)).Should(ContainElement("Deleted: Deleted NetworkPolicy " + resources.StepsNetworkPolicyName(p)))

		By("a new single-step chain")
		single := createSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Name = "single"
			p.Spec.Steps = p.Spec.Steps[:1]
		})
		Eventually(func() int64 { return getPipeline(ctx, single).Status.ObservedGeneration }).Should(BeNumerically(">", 0))
		Consistently(noPolicy(ctx, single), "2s").Should(BeTrue())

		By("a second step again: a new policy")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps = append(p.Spec.Steps, pipelinev1.Step{Name: "step-2", Image: "nginx:latest", Model: "facedetection-2"})
		})
		Eventually(func() types.UID { return policyOf(ctx, p).UID }).ShouldNot(Equal(uid))
		Expect(policyOf(ctx, p).Spec).To(Equal(policySpec(p.Name, true, stepPodLabels(p.Name), 80)))
	})

	It("is deleted by an operator whose step policies are off, which leaves others' policies alone, and made again once on", func() {
		By("converging a Pipeline with a manager whose policies are on")
		first := startOwnManager(ns, ownManagerOptions{})
		p := runningSample(ctx, ns, forOwnManagers(ns))
		made := policyOf(ctx, p)
		first.stop()

		By("a manager with the policies off deletes the policy of the converged Pipeline, though its spec did not change")
		generation := getPipeline(ctx, p).Generation
		off := startOwnManager(ns, ownManagerOptions{disableStepNetworkPolicies: true})
		Eventually(noPolicy(ctx, p)).Should(BeTrue())
		Expect(getPipeline(ctx, p).Generation).To(Equal(generation))

		By("and makes none for a new Pipeline, nor touches a tenant's policy of the name it would give it")
		tenants := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "other-steps", Namespace: ns},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
		Expect(k8sClient.Create(ctx, tenants)).To(Succeed())
		other := runningSample(ctx, ns, forOwnManagers(ns), func(p *pipelinev1.Pipeline) { p.Name = "other" })
		Expect(resources.StepsNetworkPolicyName(other)).To(Equal(tenants.Name))
		Consistently(func() types.UID { return child(ctx, &networkingv1.NetworkPolicy{}, ns, tenants.Name).UID }, "2s").
			Should(Equal(tenants.UID))
		Expect(child(ctx, &networkingv1.NetworkPolicy{}, ns, tenants.Name).OwnerReferences).To(BeEmpty())
		Expect(condition(ctx, other, pipelinev1.ConditionDegraded)()).To(Or(BeNil(), HaveField("Reason", Not(Equal(pipelinev1.ReasonNameConflict)))),
			"a policy it does not want is no conflict")
		off.stop()

		By("a manager with the policies on makes the Pipeline's again, and reports the tenant's in the way")
		startOwnManager(ns, ownManagerOptions{})
		Eventually(func() types.UID { return policyOf(ctx, p).UID }).ShouldNot(Equal(made.UID))
		Expect(policyOf(ctx, p).Spec).To(Equal(made.Spec))
		Eventually(func() string {
			if c := condition(ctx, other, pipelinev1.ConditionDegraded)(); c != nil && c.Status == metav1.ConditionTrue {
				return c.Reason
			}
			return ""
		}).Should(Equal(pipelinev1.ReasonNameConflict))
		Expect(child(ctx, &networkingv1.NetworkPolicy{}, ns, tenants.Name).UID).To(Equal(tenants.UID), "the tenant's policy is left as it is")
		Expect(k8sClient.Delete(ctx, tenants)).To(Succeed())
		Eventually(func() bool {
			np := &networkingv1.NetworkPolicy{}
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenants.Name}, np)
			return err == nil && metav1.IsControlledBy(np, getPipeline(ctx, other))
		}, "20s").Should(BeTrue(), "once the tenant's policy is gone, the Pipeline's takes its name")
	})
})
