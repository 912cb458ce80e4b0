package pipeline

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

var _ = Describe("Steps pinned by node name", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("keeps a step on its node when another node gives itself that node's hostname label", func() {
		location, _ := edgeNodes(ns)
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Location = location })
		Expect(deploymentOf(ctx, p, 1).Spec.Template.Spec.Affinity).To(Equal(nameAffinity(location)))

		By("a second node, whose kubelet is compromised, carries the hostname label of the step's node")
		rogue := ns + "-rogue"
		createHostnameNode(rogue, location)
		// The rogue node's events reach the Pipeline (it names the location by its label): a
		// pass runs, and leaves the step where it is.
		Consistently(func() *corev1.Affinity { return deploymentOf(ctx, p, 1).Spec.Template.Spec.Affinity }, "3s").
			Should(Equal(nameAffinity(location)), "pinned by the real node's name")
		Expect(deploymentOf(ctx, p, 1).Spec.Template.Spec.NodeSelector).NotTo(HaveKey(corev1.LabelHostname))
		Expect(stepStatus(ctx, p, 1)()).To(And(HaveField("Node", location), HaveField("NodeReady", HaveValue(BeTrue()))))
		Expect(condition(ctx, p, pipelinev1.ConditionDegraded)()).To(HaveField("Status", metav1.ConditionFalse))
	})

	It("pins a step to no node when several carry its location's hostname label and none has its name, and says which", func() {
		shared, a, b := ns+"-shared", ns+"-host-a", ns+"-host-b"
		createHostnameNode(a, shared)
		createHostnameNode(b, shared)
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Location = shared })
		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", pipelinev1.ReasonNodeAmbiguous),
			HaveField("Message", ContainSubstring("step 2 (step-2): location "+shared+" is ambiguous: no node is named "+shared+
				" and nodes "+a+", "+b+" all carry the label kubernetes.io/hostname="+shared))))
		Expect(deploymentOf(ctx, p, 1).Spec.Template.Spec.Affinity).To(Equal(nameAffinity(shared)),
			"pinned to the name of the location, which no node has")

		By("one of them goes: the location names the other one")
		Expect(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: b}})).To(Succeed())
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(a))
		Eventually(func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionDegraded)()).Reason }).
			ShouldNot(Equal(pipelinev1.ReasonNodeAmbiguous))
		Expect(stepStatus(ctx, p, 1)()).To(HaveField("Node", shared), "the status names the location")
	})

	It("re-pins a Deployment an earlier version pinned by hostname label, without counting a move", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 1, 1, ""))
		series := map[string]string{"namespace": ns, "pipeline": p.Name, "step": "step-2"}
		Expect(gathered(metrics.MetricStepFailovers, series)).To(BeZero())

		By("the step's Deployment is as the earlier version applied it: a node selector on the hostname label")
		legacy := resources.StepDeployment(p, 1, "", location, "")
		legacy.Spec.Template.Spec.Affinity = nil
		legacy.Spec.Template.Spec.WithNodeSelector(map[string]string{corev1.LabelHostname: location})
		stamped, err := apply.Stamped(legacy)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(stamped), client.FieldOwner(apply.FieldManager),
			client.ForceOwnership)).To(Succeed())

		By("the operator pins it by the node's name and drops the selector, on the same node")
		Eventually(func() *corev1.PodSpec { return &deploymentOf(ctx, p, 1).Spec.Template.Spec }).Should(And(
			HaveField("Affinity", Equal(nameAffinity(location))),
			HaveField("NodeSelector", Not(HaveKey(corev1.LabelHostname)))))
		Consistently(eventNotes(ctx, p), "2s").ShouldNot(ContainElement(Or(ContainSubstring(pipelinev1.EventFailedOver),
			ContainSubstring(pipelinev1.EventRelocated), ContainSubstring(pipelinev1.EventFailedBack))))
		Expect(gathered(metrics.MetricStepFailovers, series)).To(BeZero(), "no failover counted")
	})
})
