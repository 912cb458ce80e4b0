package pipeline

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// routerNodeOf is the node the router's Deployment of p is pinned to.
func routerNodeOf(ctx context.Context, p *pipelinev1.Pipeline) func() string {
	return func() string { return resources.PinnedNode(&routerDeploymentOf(ctx, p).Spec.Template.Spec) }
}

// withRouterFailover runs the router (dataPath.mode Router) pinned to location with fallback as
// its fallback location, and sets the failover timings.
func withRouterFailover(location, fallback string, after, failbackAfter int32) func(*pipelinev1.Pipeline) {
	return func(p *pipelinev1.Pipeline) {
		withRouter(p)
		p.Spec.DataPath.Router.Location, p.Spec.DataPath.Router.FallbackLocations = location, []string{fallback}
		p.Spec.Failover = &pipelinev1.Failover{AfterSeconds: ptr.To(after), FailbackAfterSeconds: ptr.To(failbackAfter)}
	}
}

// runningRouted creates the sample with edit and plays the cluster until it runs, the router
// included.
func runningRouted(ctx context.Context, ns string, edit func(*pipelinev1.Pipeline)) *pipelinev1.Pipeline {
	GinkgoHelper()
	p := createSample(ctx, ns, edit)
	Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseCreating))
	bindStorage(ctx, p)
	rollOut(ctx, p)
	rollOutRouter(ctx, p)
	Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	return getPipeline(ctx, p)
}

var _ = Describe("Failover of a pinned router", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("fails the router over after afterSeconds and back after failbackAfterSeconds, as a step", func() {
		location, fallback := edgeNodes(ns)
		p := runningRouted(ctx, ns, withRouterFailover(location, fallback, 2, 3))
		Expect(routerNodeOf(ctx, p)()).To(Equal(location))
		Expect(getPipeline(ctx, p).Status).To(And(
			HaveField("RouterNode", location), HaveField("RouterNodeReady", HaveValue(BeTrue()))))
		before := failovers(p, resources.RouterMetricName)()
		service := routerServiceOf(ctx, p).Spec

		By("the location stops being ready: the router stays for afterSeconds, then moves")
		down := time.Now().Truncate(time.Second)
		setNodeReady(ctx, location, corev1.ConditionFalse, down)
		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded)).Should(And(
			HaveField("Reason", pipelinev1.ReasonNodeNotReady),
			HaveField("Message", ContainSubstring("router: node "+location+" is not ready"))))
		Consistently(routerNodeOf(ctx, p), time.Until(down.Add(1500*time.Millisecond))).Should(Equal(location), "not before afterSeconds")
		Eventually(routerNodeOf(ctx, p)).Should(Equal(fallback))
		Expect(time.Since(down)).To(BeNumerically(">=", 2*time.Second), "not before afterSeconds")
		Expect(time.Since(down)).To(BeNumerically("<", 15*time.Second), "soon after afterSeconds")
		Expect(routerDeploymentOf(ctx, p).Spec.Template.Spec.Affinity).To(Equal(nameAffinity(fallback)))
		Eventually(condition(ctx, p, pipelinev1.ConditionProgressing)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pipelinev1.ReasonFailingOver),
			HaveField("Message", ContainSubstring("the router is moving to fallback node "+fallback))))
		Eventually(eventNotes(ctx, p)).Should(ContainElement(
			pipelinev1.EventFailedOver + ": Router moved from node " + location + ", not ready for 2s or more, to node " + fallback))
		Expect(failovers(p, resources.RouterMetricName)()).To(Equal(before + 1))
		Expect(routerServiceOf(ctx, p).Spec.Selector).To(Equal(service.Selector), "the entry does not move")
		Expect(nodeOf(ctx, p, 0)()).To(Equal(sampleNodes[0]), "the steps stay")

		rollOutRouter(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(getPipeline(ctx, p).Status).To(And(
			HaveField("RouterNode", fallback), HaveField("RouterNodeReady", HaveValue(BeTrue()))))
		expectNoWritesOnReconcile(ctx, getPipeline(ctx, p))

		By("the location is ready again: the router returns once it has been ready for failbackAfterSeconds")
		back := time.Now().Truncate(time.Second)
		setNodeReady(ctx, location, corev1.ConditionTrue, back)
		Eventually(routerNodeOf(ctx, p)).Should(Equal(location))
		Expect(time.Since(back)).To(BeNumerically(">=", 3*time.Second), "not before failbackAfterSeconds")
		Eventually(eventNotes(ctx, p)).Should(ContainElement(
			pipelinev1.EventFailedBack + ": Router moved back from node " + fallback + " to node " + location + ", which is ready"))
		Expect(failovers(p, resources.RouterMetricName)()).To(Equal(before+1), "a failback is no failover")
		rollOutRouter(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(getPipeline(ctx, p).Status.RouterNode).To(Equal(location))
	})

	It("starts the router on its fallback when its location does not exist, without counting a move", func() {
		_, fallback := edgeNodes(ns)
		absent := ns + "-edge-absent"
		p := createSample(ctx, ns, withRouterFailover(absent, fallback, 1, 300))
		Eventually(routerNodeOf(ctx, p)).Should(Equal(fallback))
		Expect(gathered(metrics.MetricStepFailovers, map[string]string{"namespace": ns, "pipeline": p.Name, "step": resources.RouterMetricName})).To(
			BeZero(), "the router's series exists at 0 before any failover")
		Consistently(eventNotes(ctx, p), "2s").ShouldNot(ContainElement(ContainSubstring(pipelinev1.EventFailedOver)))
	})

	DescribeTable("refuses invalid router failover settings at admission with a specific message",
		func(edit func(p *pipelinev1.Pipeline), message string) {
			p := testenv.Sample(GinkgoT(), ns)
			p.UID = ""
			withRouter(p)
			edit(p)
			err := k8sClient.Create(ctx, p)
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), err.Error())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("fallbackLocations without location", func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath.Router.Location, p.Spec.DataPath.Router.FallbackLocations = "", []string{"edge-b"}
		}, "router.fallbackLocations needs router.location"),
		Entry("fallbackLocations repeating location", func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath.Router.FallbackLocations = []string{p.Spec.DataPath.Router.Location}
		}, "router.fallbackLocations must not repeat router.location"),
		Entry("a fallback named twice", func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath.Router.FallbackLocations = []string{"edge-b", "edge-b"}
		}, "router.fallbackLocations must not name a node twice"),
		Entry("more than 8 fallbacks", func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath.Router.FallbackLocations = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
		}, "must have at most 8 items"),
		Entry("a fallback that is no node name", func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath.Router.FallbackLocations = []string{"Edge_B"}
		}, "spec.dataPath.router.fallbackLocations[0]"),
	)
})
