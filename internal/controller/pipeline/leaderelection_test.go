package pipeline

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/leaderelection"
)

var _ = Describe("Leader election", func() {
	It("lets only the leader write, and hands over at once when the leader stops", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		// A lease far longer than the retry period: a takeover within a few retry periods shows
		// that the leader released the lease instead of letting it expire.
		timings := leaderelection.Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 200 * time.Millisecond}
		opts := ownManagerOptions{leaseID: leaderelection.ID, lease: timings}

		leader := startOwnManager(ns, opts)
		Eventually(leader.elected).Should(BeTrue())
		follower := startOwnManager(ns, opts)

		By("converging a Pipeline: only the leader reconciles and writes")
		p := runningSample(ctx, ns, forOwnManagers(ns))
		Expect(leader.counter.writes.Load()).To(BeNumerically(">", 0))
		Consistently(func(g Gomega) {
			g.Expect(follower.elected()).To(BeFalse())
			g.Expect(follower.passes.Load()).To(BeZero())
			g.Expect(follower.counter.writes.Load()).To(BeZero())
		}).Should(Succeed())

		By("stopping the leader: the follower takes the lease over without waiting for it to expire")
		stopped := time.Now()
		leader.stop()
		Eventually(follower.elected, "5s").Should(BeTrue())
		Expect(time.Since(stopped)).To(BeNumerically("<", timings.LeaseDuration))
		lease := &coordinationv1.Lease{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: leaderelection.ID}, lease)).To(Succeed())
		Expect(lease.Spec.LeaseTransitions).To(HaveValue(BeNumerically(">=", 1)))

		By("the new leader converges a changed Pipeline; the old one writes no more")
		written := leader.counter.writes.Load()
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Image = "nginx:1.27" })
		Eventually(func() string { return deploymentOf(ctx, p, 0).Spec.Template.Spec.Containers[0].Image }).Should(Equal("nginx:1.27"))
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(follower.passes.Load()).To(BeNumerically(">", 0))
		Expect(follower.counter.writes.Load()).To(BeNumerically(">", 0))
		Expect(leader.counter.writes.Load()).To(Equal(written))
	})
})
