package controller

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// nodeOf is the node the Deployment of step i of p is pinned to.
func nodeOf(ctx context.Context, p *pipelinev1beta1.Pipeline, i int) func() string {
	return func() string { return deploymentOf(ctx, p, i).Spec.Template.Spec.NodeSelector[corev1.LabelHostname] }
}

// stepStatus is the status of step i of p.
func stepStatus(ctx context.Context, p *pipelinev1beta1.Pipeline, i int) func() pipelinev1beta1.StepStatus {
	return func() pipelinev1beta1.StepStatus {
		steps := getPipeline(ctx, p).Status.DetailPhase.StepsPhase
		if len(steps) <= i {
			return pipelinev1beta1.StepStatus{}
		}
		return steps[i]
	}
}

// failovers is the failover counter of step of p in the suite's registry.
func failovers(p *pipelinev1beta1.Pipeline, step string) func() float64 {
	return func() float64 {
		families, err := metricsReg.Gather()
		Expect(err).NotTo(HaveOccurred())
		for _, f := range families {
			if f.GetName() != MetricStepFailovers {
				continue
			}
			want := map[string]string{"namespace": p.Namespace, "pipeline": p.Name, "step": step}
			for _, m := range f.GetMetric() {
				matches := 0
				for _, l := range m.GetLabel() {
					if want[l.GetName()] == l.GetValue() {
						matches++
					}
				}
				if matches == len(want) {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
}

// edgeNodes creates two ready nodes of the test's own: the location and the fallback of step 2.
func edgeNodes(ns string) (string, string) {
	GinkgoHelper()
	location, fallback := ns+"-edge-a", ns+"-edge-b"
	createNode(location)
	createNode(fallback)
	DeferCleanup(func(ctx context.Context) {
		for _, n := range []string{location, fallback} {
			Expect(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
		}
	})
	return location, fallback
}

// withFailover pins step 2 to location with fallback as its fallback location, and sets the
// failover timings.
func withFailover(location, fallback string, after, failbackAfter int32, failback pipelinev1beta1.FailbackPolicy) func(*pipelinev1beta1.Pipeline) {
	return func(p *pipelinev1beta1.Pipeline) {
		p.Spec.Steps[1].Location = location
		p.Spec.Steps[1].FallbackLocations = []string{fallback}
		p.Spec.Failover = &pipelinev1beta1.Failover{AfterSeconds: ptr.To(after), FailbackAfterSeconds: ptr.To(failbackAfter), Failback: failback}
	}
}

var _ = Describe("Node health and failover", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("says at once that a step's node is not ready, and clears when it is back", func() {
		location, _ := edgeNodes(ns)
		p := runningSample(ctx, ns, func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[1].Location = location })
		Expect(stepStatus(ctx, p, 1)()).To(And(
			HaveField("Node", location), HaveField("NodeReady", HaveValue(BeTrue()))))
		Expect(stepStatus(ctx, p, 0)().Node).To(Equal("xx-test-node236"))

		By("the node's kubelet stops reporting")
		setNodeReady(ctx, location, corev1.ConditionUnknown, time.Now().Add(-10*time.Second))
		Eventually(condition(ctx, p, pipelinev1beta1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", pipelinev1beta1.ReasonNodeNotReady),
			HaveField("Message", And(ContainSubstring("step 2 (step-2): node "+location+" is not ready (Ready Unknown since"),
				ContainSubstring("no fallbackLocations")))))
		Expect(stepStatus(ctx, p, 1)()).To(And(HaveField("Node", location), HaveField("NodeReady", HaveValue(BeFalse()))))
		Expect(nodeOf(ctx, p, 1)()).To(Equal(location), "a step without fallbackLocations stays")

		By("the node is cordoned while ready")
		setNodeReady(ctx, location, corev1.ConditionTrue, time.Now())
		cordon(ctx, location, true)
		Eventually(condition(ctx, p, pipelinev1beta1.ConditionDegraded)).Should(
			HaveField("Message", ContainSubstring("node "+location+" is ready but cordoned")))

		By("the node is back")
		cordon(ctx, location, false)
		Eventually(condition(ctx, p, pipelinev1beta1.ConditionDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
		Expect(stepStatus(ctx, p, 1)().NodeReady).To(HaveValue(BeTrue()))
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1beta1.PipelinePhaseRunning))
	})

	It("fails over after afterSeconds and fails back after failbackAfterSeconds", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 2, 3, ""))
		Expect(getPipeline(ctx, p).Spec.Failover.Failback).To(Equal(pipelinev1beta1.FailbackAutomatic), "the CRD defaults failback")
		before := failovers(p, "step-2")()

		By("the location has been not ready for longer than afterSeconds")
		setNodeReady(ctx, location, corev1.ConditionFalse, time.Now().Add(-time.Minute))
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(fallback))
		Eventually(condition(ctx, p, pipelinev1beta1.ConditionProgressing)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pipelinev1beta1.ReasonFailingOver)))
		Eventually(eventNotes(ctx, p)).Should(ContainElement(ContainSubstring(
			"Step 2 (step-2) moved from node " + location + ", not ready for 2s or more, to node " + fallback)))
		Expect(failovers(p, "step-2")()).To(Equal(before + 1))
		Expect(serviceOf(ctx, p, 1).Spec.Selector).To(Equal(stepSelector(p, 1)), "the Service does not move")
		Expect(envOf(deploymentOf(ctx, p, 0))[pipelinev1beta1.EnvNextStepURL]).To(Equal(stepURL(p, 1)))

		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1beta1.PipelinePhaseRunning))
		Expect(stepStatus(ctx, p, 1)()).To(And(HaveField("Node", fallback), HaveField("NodeReady", HaveValue(BeTrue()))))
		expectNoWritesOnReconcile(ctx, getPipeline(ctx, p))

		By("the location is ready again: the step returns once it has been ready for failbackAfterSeconds")
		back := time.Now().Truncate(time.Second)
		setNodeReady(ctx, location, corev1.ConditionTrue, back)
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(location))
		Expect(time.Since(back)).To(BeNumerically(">=", 3*time.Second), "not before failbackAfterSeconds")
		Eventually(eventNotes(ctx, p)).Should(ContainElement(ContainSubstring(
			"Step 2 (step-2) moved back from node " + fallback + " to node " + location)))
		Expect(failovers(p, "step-2")()).To(Equal(before+1), "a failback is no failover")
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1beta1.PipelinePhaseRunning))
	})

	It("leaves a step on its fallback with Manual failback until the Pipeline asks for it", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 1, 1, pipelinev1beta1.FailbackManual))
		setNodeReady(ctx, location, corev1.ConditionFalse, time.Now().Add(-time.Minute))
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(fallback))
		rollOut(ctx, p)

		setNodeReady(ctx, location, corev1.ConditionTrue, time.Now().Add(-time.Hour))
		Consistently(nodeOf(ctx, p, 1), "3s").Should(Equal(fallback))

		updatePipeline(ctx, p, func(p *pipelinev1beta1.Pipeline) {
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, pipelinev1beta1.FailbackAnnotation, "true")
		})
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(location))
	})

	It("stays where it is when no node of the step is ready", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 1, 1, ""))
		setNodeReady(ctx, fallback, corev1.ConditionFalse, time.Now().Add(-time.Minute))
		setNodeReady(ctx, location, corev1.ConditionFalse, time.Now().Add(-time.Minute))
		Eventually(condition(ctx, p, pipelinev1beta1.ConditionDegraded)).Should(And(
			HaveField("Reason", pipelinev1beta1.ReasonNodeNotReady),
			HaveField("Message", ContainSubstring("none of its nodes ("+location+", "+fallback+") is ready: the step stays on "+location))))
		Expect(nodeOf(ctx, p, 1)()).To(Equal(location))
	})

	It("does not move a step off a flapping node", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 3, 1, ""))
		for range 4 {
			setNodeReady(ctx, location, corev1.ConditionUnknown, time.Now())
			Consistently(nodeOf(ctx, p, 1), "1s").Should(Equal(location))
			setNodeReady(ctx, location, corev1.ConditionTrue, time.Now())
			Consistently(nodeOf(ctx, p, 1), "500ms").Should(Equal(location))
		}
	})

	It("keeps the failover timer across an operator restart", func() {
		location, fallback := edgeNodes(ns)
		first := startOwnManager(ns, ownManagerOptions{})
		p := runningSample(ctx, ns, forOwnManagers(ns), withFailover(location, fallback, 4, 300, ""))

		down := time.Now().Truncate(time.Second) // the apiserver keeps whole seconds
		setNodeReady(ctx, location, corev1.ConditionUnknown, down)
		Eventually(condition(ctx, p, pipelinev1beta1.ConditionDegraded)).Should(
			HaveField("Message", ContainSubstring("the step fails over in")))
		first.stop()

		By("a new operator process moves the step when the node's outage reaches afterSeconds")
		startOwnManager(ns, ownManagerOptions{})
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(fallback))
		Expect(time.Since(down)).To(BeNumerically(">=", 4*time.Second), "not before afterSeconds")
	})
})

// cordon sets node's spec.unschedulable.
func cordon(ctx context.Context, name string, unschedulable bool) {
	GinkgoHelper()
	Eventually(func() error {
		node := &corev1.Node{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		node.Spec.Unschedulable = unschedulable
		return k8sClient.Update(ctx, node)
	}).Should(Succeed())
}
