package e2e

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// runDocumented runs the README command c with the real kubectl against Pipeline p.
func runDocumented(c documentedCommand, p *pipelinev1.Pipeline) {
	GinkgoHelper()
	args, err := c.against(p.Namespace, p.Name)
	Expect(err).NotTo(HaveOccurred())
	By("kubectl " + c.line + " (aimed at " + p.Namespace + "/" + p.Name + ")")
	Expect(kubectl(args...)).To(ContainSubstring("patched"))
}

// reconciled is p's Reconciled condition (the zero condition while it has none).
func reconciled(ctx context.Context, p *pipelinev1.Pipeline) func() metav1.Condition {
	return func() metav1.Condition {
		latest := get(ctx, p)
		if c := meta.FindStatusCondition(latest.Status.Conditions, pipelinev1.ConditionReconciled); c != nil {
			return *c
		}
		return metav1.Condition{}
	}
}

// expectPausedNow checks that p reports itself paused for its current generation.
func expectPausedNow(ctx context.Context, p *pipelinev1.Pipeline) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		latest := get(ctx, p)
		c := meta.FindStatusCondition(latest.Status.Conditions, pipelinev1.ConditionReconciled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(*c).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pipelinev1.ReasonPaused),
			HaveField("ObservedGeneration", latest.Generation)))
	}).Should(Succeed())
	Eventually(eventReasons(ctx, p)).Should(ContainElement(pipelinev1.ReasonPaused))
}

// deleteStepDeployment deletes the Deployment of step (1-based) of p, waits until it is gone
// and checks that the paused operator does not make it again. It returns the deleted
// Deployment.
func deleteStepDeployment(ctx context.Context, p *pipelinev1.Pipeline, step int) *appsv1.Deployment {
	GinkgoHelper()
	d := &appsv1.Deployment{}
	Expect(admin.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: deploymentName(p, step)}, d)).To(Succeed())
	Expect(admin.Delete(ctx, d)).To(Succeed())
	gone := func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{}))
	}
	Eventually(gone).Should(BeTrue())
	Consistently(gone, "5s").Should(BeTrue(), "a paused Pipeline's deleted Deployment is not made again")
	return d
}

// expectRemade waits until the operator has made the deleted Deployment of p again.
func expectRemade(ctx context.Context, p *pipelinev1.Pipeline, deleted *appsv1.Deployment) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(deleted), d)).To(Succeed())
		g.Expect(d.UID).NotTo(Equal(deleted.UID))
		g.Expect(metav1.IsControlledBy(d, get(ctx, p))).To(BeTrue())
	}).Should(Succeed())
	Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	Eventually(reconciled(ctx, p)).Should(HaveField("Status", metav1.ConditionTrue))
}

// joinedNodeTaint keeps every pod but the test's own off a node joinNode registers: the node goes
// after the spec, and the pods of the other specs (the manager's, the routers') must not go with it.
var joinedNodeTaint = corev1.Taint{Key: "e2e.distri-infer.ndsl.cn/joined", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// joinedNodeToleration lets a step's pods onto a node joinNode registers.
var joinedNodeToleration = corev1.Toleration{Key: joinedNodeTaint.Key, Operator: corev1.TolerationOpEqual,
	Value: joinedNodeTaint.Value, Effect: joinedNodeTaint.Effect}

// createOnFallback makes the sample Pipeline, under failback Manual, whose step 2 is located on
// the node preferred, which joins the cluster only later (with joinedNodeTaint, which the step
// tolerates): until then the step runs on its fallback node, which it returns.
func createOnFallback(ctx context.Context, ns, preferred string) (p *pipelinev1.Pipeline, fallback string) {
	GinkgoHelper()
	fallback = "xx-test-node239"
	p = createSample(ctx, ns, func(p *pipelinev1.Pipeline) {
		p.Spec.Steps[1].Location = preferred
		p.Spec.Steps[1].FallbackLocations = []string{fallback}
		p.Spec.Steps[1].Tolerations = []corev1.Toleration{joinedNodeToleration}
		p.Spec.Failover = &pipelinev1.Failover{Failback: pipelinev1.FailbackManual}
	})
	return p, fallback
}

// joinNode registers a node named name that kwok runs, as hack/localcluster registers its
// nodes, tainted with joinedNodeTaint, and removes it after the spec, once the Pipeline p no
// longer has pods there.
func joinNode(ctx context.Context, name string, p *pipelinev1.Pipeline) {
	GinkgoHelper()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
				"type": "kwok", kwokNodeLabel: "fake",
			},
		},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{joinedNodeTaint}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	Expect(admin.Create(ctx, node)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		// The Pipeline's pods go first, while kwok still runs the node that ends them.
		Expect(client.IgnoreNotFound(admin.Delete(ctx, p))).To(Succeed())
		Eventually(func() []corev1.Pod { return stepPods(ctx, p, 2) }).Should(BeEmpty())
		Expect(client.IgnoreNotFound(admin.Delete(ctx, node))).To(Succeed())
	})
	Eventually(nodeReady(ctx, name)).Should(Equal(corev1.ConditionTrue))
}

// failbackRequests follows the spec.failover.failbackNow of the Pipeline that w watches: the
// values it took, true for a request, without repeats.
type failbackRequests struct {
	w    watch.Interface
	seen []bool
}

func (f *failbackRequests) values() []bool {
	for {
		select {
		case ev, ok := <-f.w.ResultChan():
			if !ok {
				return f.seen
			}
			p, isPipeline := ev.Object.(*pipelinev1.Pipeline)
			if !isPipeline {
				continue
			}
			v := p.Spec.Failover != nil && p.Spec.Failover.FailbackNow != nil && *p.Spec.Failover.FailbackNow
			if n := len(f.seen); n == 0 || f.seen[n-1] != v {
				f.seen = append(f.seen, v)
			}
		default:
			return f.seen
		}
	}
}

// The commands README.md gives to pause, resume and fail back a Pipeline, read from the file and
// run as written (split as a shell splits them) with the kubectl the Makefile built, each aimed
// at the spec's own Pipeline.
var _ = Describe("The kubectl commands of README.md", Ordered, func() {
	var commands map[string]documentedCommand
	BeforeAll(func() {
		var err error
		commands, err = readmeCommands(readmePath)
		Expect(err).NotTo(HaveOccurred())
	})

	It("pause a Pipeline, which then leaves a deleted child alone, and resume it, which makes the child again", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		p := createSample(ctx, ns)
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))

		By("the pause command sets spec.paused: the Pipeline reports Reconciled False, reason Paused")
		runDocumented(commands[commandPause], p)
		Expect(get(ctx, p).Spec.Paused).To(HaveValue(BeTrue()))
		expectPausedNow(ctx, p)
		deleted := deleteStepDeployment(ctx, p, 1)

		By("the resume command clears spec.paused: the operator makes the deleted Deployment again")
		runDocumented(commands[commandResume], p)
		resumed := get(ctx, p)
		Expect(resumed.Spec.Paused).To(BeNil())
		Expect(resumed.Annotations).NotTo(HaveKey(pipelinev1.PausedAnnotation))
		expectRemade(ctx, p, deleted)
	})

	It("resume a Pipeline made in v1beta1 and paused there with the annotation", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		p := createSampleV1beta1(ctx, ns)
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))

		By("pausing it as v1beta1 says: the annotation " + pipelinev1beta1.PausedAnnotation + ": \"true\" on the v1beta1 resource")
		v1beta1 := getV1beta1(ctx, p)
		unpaused := v1beta1.DeepCopy()
		metav1.SetMetaDataAnnotation(&v1beta1.ObjectMeta, pipelinev1beta1.PausedAnnotation, "true")
		Expect(admin.Patch(ctx, v1beta1, client.MergeFrom(unpaused))).To(Succeed())
		Expect(get(ctx, p).Spec.Paused).To(HaveValue(BeTrue()), "the annotation reads as spec.paused in v1")
		expectPausedNow(ctx, p)
		deleted := deleteStepDeployment(ctx, p, 2)

		By("README's resume command resumes it: the annotation is gone in v1beta1, the Deployment is made again")
		runDocumented(commands[commandResume], p)
		Expect(get(ctx, p).Spec.Paused).To(BeNil())
		Expect(getV1beta1(ctx, p).Annotations).NotTo(HaveKey(pipelinev1beta1.PausedAnnotation))
		expectRemade(ctx, p, deleted)
	})

	It("fail a step back at once under failback Manual, the request then cleared by the operator", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		preferred := "failback-" + ns
		p, fallback := createOnFallback(ctx, ns, preferred)
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Eventually(runningPodNodes(ctx, p, 2)).Should(ConsistOf(fallback))
		Expect(get(ctx, p).Status.Steps[1].Node).To(Equal(fallback))

		By("the preferred node joins and is ready: under failback Manual the step stays where it is")
		joinNode(ctx, preferred, p)
		Consistently(runningPodNodes(ctx, p, 2), "5s").Should(ConsistOf(fallback))
		Expect(get(ctx, p).Status.Steps[1].Node).To(Equal(fallback))

		By("the failback command sets spec.failover.failbackNow; the operator moves the step back and clears it")
		w, err := admin.Watch(ctx, &pipelinev1.PipelineList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": p.Name})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		requests := &failbackRequests{w: w}
		runDocumented(commands[commandFailback], p)
		Eventually(requests.values).Should(Equal([]bool{false, true, false}), "failbackNow: unset, set by the command, cleared by the operator")
		Eventually(runningPodNodes(ctx, p, 2)).Should(ConsistOf(preferred))
		Eventually(func() string { return get(ctx, p).Status.Steps[1].Node }).Should(Equal(preferred))
		Eventually(eventReasons(ctx, p)).Should(ContainElement(pipelinev1.EventFailedBack))
		Consistently(func() *bool { return get(ctx, p).Spec.Failover.FailbackNow }, "2s").Should(BeNil())
		Expect(get(ctx, p).Spec.Failover.Failback).To(Equal(pipelinev1.FailbackManual))
	})
})
