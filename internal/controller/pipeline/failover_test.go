package pipeline

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// nodeOf is the node the Deployment of step i of p is pinned to.
func nodeOf(ctx context.Context, p *pipelinev1.Pipeline, i int) func() string {
	return func() string { return resources.PinnedNode(&deploymentOf(ctx, p, i).Spec.Template.Spec) }
}

// nameAffinity is the affinity of a pod pinned to the node named node.
func nameAffinity(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
}

// stepStatus is the status of step i of p.
func stepStatus(ctx context.Context, p *pipelinev1.Pipeline, i int) func() pipelinev1.StepStatus {
	return func() pipelinev1.StepStatus {
		steps := getPipeline(ctx, p).Status.Steps
		if len(steps) <= i {
			return pipelinev1.StepStatus{}
		}
		return steps[i]
	}
}

// failovers is the failover counter of step of p in the suite's registry.
func failovers(p *pipelinev1.Pipeline, step string) func() float64 {
	return func() float64 {
		families, err := metricsReg.Gather()
		Expect(err).NotTo(HaveOccurred())
		for _, f := range families {
			if f.GetName() != metrics.MetricStepFailovers {
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
func withFailover(location, fallback string, after, failbackAfter int32, failback pipelinev1.FailbackPolicy) func(*pipelinev1.Pipeline) {
	return func(p *pipelinev1.Pipeline) {
		p.Spec.Steps[1].Location = location
		p.Spec.Steps[1].FallbackLocations = []string{fallback}
		p.Spec.Failover = &pipelinev1.Failover{AfterSeconds: ptr.To(after), FailbackAfterSeconds: ptr.To(failbackAfter), Failback: failback}
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
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Location = location })
		Expect(stepStatus(ctx, p, 1)()).To(And(
			HaveField("Node", location), HaveField("NodeReady", HaveValue(BeTrue()))))
		Expect(stepStatus(ctx, p, 0)().Node).To(Equal("xx-test-node236"))

		By("the node's kubelet stops reporting")
		setNodeReady(ctx, location, corev1.ConditionUnknown, time.Now().Add(-10*time.Second))
		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", pipelinev1.ReasonNodeNotReady),
			HaveField("Message", And(ContainSubstring("step 2 (step-2): node "+location+" is not ready (Ready Unknown since"),
				ContainSubstring("no fallbackLocations")))))
		Expect(stepStatus(ctx, p, 1)()).To(And(HaveField("Node", location), HaveField("NodeReady", HaveValue(BeFalse()))))
		Expect(nodeOf(ctx, p, 1)()).To(Equal(location), "a step without fallbackLocations stays")

		By("the node is cordoned while ready")
		setNodeReady(ctx, location, corev1.ConditionTrue, time.Now())
		cordon(ctx, location, true)
		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded)).Should(And(
			HaveField("Reason", pipelinev1.ReasonNodeNotReady),
			HaveField("Message", ContainSubstring("node "+location+" is ready but cordoned"))))
		Expect(phase(ctx, p)()).To(Equal(pipelinev1.PipelinePhaseRunning), "a cordoned node still runs the step's pods")
		Expect(condition(ctx, p, pipelinev1.ConditionProgressing)()).To(HaveField("Reason", pipelinev1.ReasonRolloutComplete))

		By("the node is back")
		cordon(ctx, location, false)
		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
		Expect(stepStatus(ctx, p, 1)().NodeReady).To(HaveValue(BeTrue()))
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	})

	It("moves a step off a ready node whose NoExecute taint evicts its pods, counted from the taint", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 30, 3600, ""))

		By("a taint added a moment ago: the step waits for afterSeconds")
		taint(ctx, location, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute,
			TimeAdded: ptr.To(metav1.NewTime(time.Now()))})
		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded)).Should(And(
			HaveField("Reason", pipelinev1.ReasonNodeNotReady), HaveField("Message", ContainSubstring(location))))
		Expect(phase(ctx, p)()).To(Equal(pipelinev1.PipelinePhaseFailed), "the taint evicts the step's pods")
		Consistently(nodeOf(ctx, p, 1), "2s").Should(Equal(location))

		By("the same taint, added longer ago than afterSeconds")
		taint(ctx, location, corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute,
			TimeAdded: ptr.To(metav1.NewTime(time.Now().Add(-time.Minute)))})
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(fallback))
	})

	DescribeTable("refuses invalid failover settings at admission with a specific message",
		func(edit func(p *pipelinev1.Pipeline), message string) {
			p := testenv.Sample(GinkgoT(), ns)
			p.UID = ""
			edit(p)
			err := k8sClient.Create(ctx, p)
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), err.Error())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("fallbackLocations without location", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Location, p.Spec.Steps[1].FallbackLocations = "", []string{"edge-b"}
		}, "fallbackLocations needs location"),
		Entry("fallbackLocations repeating location", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].FallbackLocations = []string{p.Spec.Steps[1].Location}
		}, "fallbackLocations must not repeat location"),
		Entry("a fallback named twice", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].FallbackLocations = []string{"edge-b", "edge-b"}
		}, "fallbackLocations must not name a node twice"),
		Entry("more than 8 fallbacks", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].FallbackLocations = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
		}, "must have at most 8 items"),
		Entry("afterSeconds of 0", func(p *pipelinev1.Pipeline) {
			p.Spec.Failover = &pipelinev1.Failover{AfterSeconds: ptr.To[int32](0)}
		}, "afterSeconds in body should be greater than or equal to 1"),
		Entry("an unknown failback policy", func(p *pipelinev1.Pipeline) {
			p.Spec.Failover = &pipelinev1.Failover{Failback: "Sometimes"}
		}, "Unsupported value: \"Sometimes\""),
	)

	It("fails over after afterSeconds and fails back after failbackAfterSeconds", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 2, 3, ""))
		Expect(getPipeline(ctx, p).Spec.Failover.Failback).To(Equal(pipelinev1.FailbackAutomatic), "the CRD defaults failback")
		before := failovers(p, "step-2")()

		By("the location stops being ready: the step stays for afterSeconds, then moves")
		// Condition times are whole seconds: the outage starts at the second it is recorded with.
		down := time.Now().Truncate(time.Second)
		setNodeReady(ctx, location, corev1.ConditionFalse, down)
		Consistently(nodeOf(ctx, p, 1), time.Until(down.Add(1500*time.Millisecond))).Should(Equal(location), "not before afterSeconds")
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(fallback))
		Expect(time.Since(down)).To(BeNumerically(">=", 2*time.Second), "not before afterSeconds")
		Expect(time.Since(down)).To(BeNumerically("<", 15*time.Second), "soon after afterSeconds")
		Eventually(condition(ctx, p, pipelinev1.ConditionProgressing)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pipelinev1.ReasonFailingOver)))
		Eventually(eventNotes(ctx, p)).Should(ContainElement(ContainSubstring(
			"Step 2 (step-2) moved from node " + location + ", not ready for 2s or more, to node " + fallback)))
		Expect(failovers(p, "step-2")()).To(Equal(before + 1))
		Expect(serviceOf(ctx, p, 1).Spec.Selector).To(Equal(resources.StepSelector(p, 1)), "the Service does not move")
		Expect(envOf(deploymentOf(ctx, p, 0))[pipelinev1.EnvNextStepURL]).To(Equal(resources.StepURL(p, 1, "")))

		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
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
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	})

	It("leaves a step on its fallback with Manual failback until the Pipeline asks for it", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 1, 1, pipelinev1.FailbackManual))
		setNodeReady(ctx, location, corev1.ConditionFalse, time.Now().Add(-time.Minute))
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(fallback))
		rollOut(ctx, p)

		setNodeReady(ctx, location, corev1.ConditionTrue, time.Now().Add(-time.Hour))
		Consistently(nodeOf(ctx, p, 1), "3s").Should(Equal(fallback))

		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Failover.FailbackNow = ptr.To(true) })
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(location))
		Eventually(func() *bool { return getPipeline(ctx, p).Spec.Failover.FailbackNow }).Should(BeNil(), "failbackNow is one-shot")
		rollOut(ctx, p)

		By("a later failover stays on the fallback when the location is back")
		setNodeReady(ctx, location, corev1.ConditionFalse, time.Now().Add(-time.Minute))
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(fallback))
		setNodeReady(ctx, location, corev1.ConditionTrue, time.Now().Add(-time.Hour))
		Consistently(nodeOf(ctx, p, 1), "3s").Should(Equal(fallback))

		By("the annotation v1beta1 asks with, written on the v1 object, is a request too, and goes the same way")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, pipelinev1.FailbackAnnotation, "true")
		})
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(location))
		Eventually(func() bool { return getPipeline(ctx, p).FailbackRequested() }).Should(BeFalse(), "the request is one-shot")
	})

	It("moves a step at once off a node the spec no longer names, and says so", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 1, 300, ""))
		setNodeReady(ctx, location, corev1.ConditionFalse, time.Now().Add(-time.Minute))
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(fallback))
		rollOut(ctx, p)

		By("the step gets a new location and the fallback it runs on is no longer listed")
		third := ns + "-edge-c"
		createNode(third)
		DeferCleanup(func(ctx context.Context) {
			Expect(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: third}})).To(Succeed())
		})
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Location = third
			p.Spec.Steps[1].FallbackLocations = []string{location}
		})
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(third))
		Eventually(eventNotes(ctx, p)).Should(ContainElement(
			pipelinev1.EventRelocated + ": Step 2 (step-2) moved from node " + fallback +
				", which its location and fallbackLocations no longer name, to node " + third))
	})

	It("counts no move for a Deployment created on a fallback, and keeps the failover series from the first pass", func() {
		_, fallback := edgeNodes(ns)
		absent := ns + "-edge-absent"
		p := createSample(ctx, ns, withFailover(absent, fallback, 1, 300, ""))
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(fallback))
		series := map[string]string{"namespace": ns, "pipeline": p.Name, "step": "step-2"}
		Expect(gathered(metrics.MetricStepFailovers, series)).To(BeZero(), "the series exists at 0 before any failover")
		Expect(gathered(metrics.MetricStepFailovers, map[string]string{"namespace": ns, "pipeline": p.Name, "step": "step-1"})).To(
			Equal(-1.0), "a step without fallbackLocations has no series")
		Consistently(eventNotes(ctx, p), "2s").ShouldNot(ContainElement(ContainSubstring(pipelinev1.EventFailedOver)))

		By("the Pipeline's series go with it")
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		Eventually(func() bool { return gone(ctx, &pipelinev1.Pipeline{}, ns, p.Name) }).Should(BeTrue())
		Eventually(func() float64 { return gathered(metrics.MetricStepFailovers, series) }).Should(Equal(-1.0))
	})

	It("records no move when a stale cache shows the step on the node it left", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 1, 1, ""))
		Expect(nodeOf(ctx, p, 1)()).To(Equal(location))
		time.Sleep(time.Second) // the location has been ready for failbackAfterSeconds

		recorder := events.NewFakeRecorder(100)
		stale := staleReader{Client: k8sClient, deployment: resources.StepObjectName(p, 1), node: fallback}
		r := &Reconciler{Client: stale, APIReader: k8sClient, Recorder: recorder, RouterImage: testenv.RouterImage}
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodeOf(ctx, p, 1)()).To(Equal(location))
		var recorded []string
		for len(recorder.Events) > 0 {
			recorded = append(recorded, <-recorder.Events)
		}
		Expect(recorded).NotTo(ContainElement(ContainSubstring(pipelinev1.EventFailedBack)))
	})

	It("writes nothing while it waits to fail over", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 3600, 300, ""))
		down := time.Now().Add(-10 * time.Second).Truncate(time.Second)
		setNodeReady(ctx, location, corev1.ConditionUnknown, down)
		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded)).Should(HaveField("Message", ContainSubstring(
			"the step fails over at "+down.Add(time.Hour).UTC().Format(time.RFC3339)+" if it stays so")))
		expectNoWritesOnReconcile(ctx, getPipeline(ctx, p))
	})

	It("stays where it is when no node of the step is ready", func() {
		location, fallback := edgeNodes(ns)
		p := runningSample(ctx, ns, withFailover(location, fallback, 1, 1, ""))
		setNodeReady(ctx, fallback, corev1.ConditionFalse, time.Now().Add(-time.Minute))
		setNodeReady(ctx, location, corev1.ConditionFalse, time.Now().Add(-time.Minute))
		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded)).Should(And(
			HaveField("Reason", pipelinev1.ReasonNodeNotReady),
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
		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded)).Should(
			HaveField("Message", ContainSubstring("the step fails over at")))
		first.stop()

		By("a new operator process moves the step when the node's outage reaches afterSeconds")
		startOwnManager(ns, ownManagerOptions{})
		Eventually(nodeOf(ctx, p, 1)).Should(Equal(fallback))
		Expect(time.Since(down)).To(BeNumerically(">=", 4*time.Second), "not before afterSeconds")
	})
})

// staleReader reads like Client, except that the Deployment named deployment is pinned to node,
// as a cache that has not seen a move yet shows it.
type staleReader struct {
	client.Client
	deployment, node string
}

func (s staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := s.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if d, ok := obj.(*appsv1.Deployment); ok && key.Name == s.deployment {
		d.Spec.Template.Spec.Affinity = nameAffinity(s.node)
	}
	return nil
}

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

// taint sets the taints of node to t alone.
func taint(ctx context.Context, name string, t corev1.Taint) {
	GinkgoHelper()
	Eventually(func() error {
		node := &corev1.Node{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		node.Spec.Taints = []corev1.Taint{t}
		return k8sClient.Update(ctx, node)
	}).Should(Succeed())
}
