package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// kwokNodeLabel selects the nodes kwok keeps alive (lease, status, pods), on the apiserver:
// a node that loses it leaves kwok's watch (hack/localcluster).
const kwokNodeLabel = "kwok.x-k8s.io/node"

// setKwokManaged makes kwok manage node, or stop managing it: its lease and status stop being
// renewed the way a dead kubelet's do, and the node lifecycle controller marks it not ready.
func setKwokManaged(ctx context.Context, name string, managed bool) {
	GinkgoHelper()
	Eventually(func() error {
		node := &corev1.Node{}
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		if managed {
			node.Labels[kwokNodeLabel] = "fake"
		} else {
			delete(node.Labels, kwokNodeLabel)
		}
		return admin.Update(ctx, node)
	}).Should(Succeed())
}

func nodeReady(ctx context.Context, name string) func() corev1.ConditionStatus {
	return func() corev1.ConditionStatus {
		node := &corev1.Node{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status
			}
		}
		return ""
	}
}

// runningPodNodes are the nodes of the running, not terminating pods of step.
func runningPodNodes(ctx context.Context, p *pipelinev1.Pipeline, step int) func() []string {
	return func() []string {
		var out []string
		for _, pod := range stepPods(ctx, p, step) {
			if pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning {
				out = append(out, pod.Spec.NodeName)
			}
		}
		return out
	}
}

var _ = Describe("A step whose node dies", Ordered, func() {
	It("fails over to its fallback node and comes back when the node returns", func() {
		ctx := context.Background()
		const location, fallback = "node-1", "node-2"
		ns := newNamespace(ctx)
		DeferCleanup(func(ctx context.Context) { setKwokManaged(ctx, location, true) })
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Location = location
			p.Spec.Steps[1].FallbackLocations = []string{fallback}
			p.Spec.Failover = &pipelinev1.Failover{AfterSeconds: ptr.To[int32](5), FailbackAfterSeconds: ptr.To[int32](10)}
		})
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(runningPodNodes(ctx, p, 2)()).To(ConsistOf(location))

		By("the node's heartbeat stops")
		down := time.Now()
		setKwokManaged(ctx, location, false)
		Eventually(nodeReady(ctx, location), 2*time.Minute).ShouldNot(Equal(corev1.ConditionTrue))
		notReady := time.Since(down)
		Eventually(func() string {
			deg := get(ctx, p).Status.Conditions
			for _, c := range deg {
				if c.Type == pipelinev1.ConditionDegraded {
					return c.Reason
				}
			}
			return ""
		}).Should(Equal(pipelinev1.ReasonNodeNotReady))

		By("the step runs on the fallback node and the Pipeline is running again")
		Eventually(runningPodNodes(ctx, p, 2), 3*time.Minute).Should(ContainElement(fallback))
		Eventually(phaseOf(ctx, p), 2*time.Minute).Should(Equal(pipelinev1.PipelinePhaseRunning))
		elsewhere := time.Since(down)
		st := get(ctx, p).Status.Steps[1]
		Expect(st.Name).To(Equal(p.Spec.Steps[1].Name))
		Expect(st.Node).To(Equal(fallback))
		Expect(st.NodeReady).To(HaveValue(BeTrue()))
		Eventually(eventReasons(ctx, p)).Should(ContainElement(pipelinev1.EventFailedOver))

		By("the node comes back")
		up := time.Now()
		setKwokManaged(ctx, location, true)
		Eventually(nodeReady(ctx, location), 2*time.Minute).Should(Equal(corev1.ConditionTrue))
		Eventually(runningPodNodes(ctx, p, 2), 3*time.Minute).Should(ContainElement(location))
		Eventually(phaseOf(ctx, p), 2*time.Minute).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(get(ctx, p).Status.Steps[1].Node).To(Equal(location))
		back := time.Since(up)
		// Condition times are whole seconds: the node's Ready time may read up to 1 s early.
		Expect(back).To(BeNumerically(">=", 9*time.Second),
			"the step came back before its node had been ready for failbackAfterSeconds")
		Eventually(eventReasons(ctx, p)).Should(ContainElement(pipelinev1.EventFailedBack))

		report := fmt.Sprintf("failover (afterSeconds 5, node-monitor-grace-period 20s): node down -> NotReady %.0fs, "+
			"node down -> step running on %s %.0fs; failback (failbackAfterSeconds 10): node up -> step running on %s %.0fs",
			notReady.Seconds(), fallback, elsewhere.Seconds(), location, back.Seconds())
		AddReportEntry("failover timings", report)
		GinkgoWriter.Println(report)
		fmt.Println(report)
	})
})

// eventReasons are the reasons of the events recorded on p.
func eventReasons(ctx context.Context, p *pipelinev1.Pipeline) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		Expect(admin.List(ctx, list, client.InNamespace(p.Namespace))).To(Succeed())
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Name == p.Name {
				reasons = append(reasons, e.Reason)
			}
		}
		return reasons
	}
}
