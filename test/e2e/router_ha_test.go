package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// routerPods are the router pods of p that are not terminating.
func routerPods(ctx context.Context, p *pipelinev1.Pipeline) []corev1.Pod {
	GinkgoHelper()
	pods := &corev1.PodList{}
	Expect(admin.List(ctx, pods, client.InNamespace(p.Namespace), client.MatchingLabels(resources.RouterSelector(p)))).To(Succeed())
	var out []corev1.Pod
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil {
			out = append(out, pod)
		}
	}
	return out
}

// readyRouterEndpoints are the pods the router's Service sends traffic to: the ready endpoints
// of its EndpointSlices.
func readyRouterEndpoints(ctx context.Context, p *pipelinev1.Pipeline) func() []string {
	return func() []string {
		slices := &discoveryv1.EndpointSliceList{}
		Expect(admin.List(ctx, slices, client.InNamespace(p.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: resources.RouterObjectName(p)})).To(Succeed())
		var pods []string
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.TargetRef != nil && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					pods = append(pods, ep.TargetRef.Name)
				}
			}
		}
		return pods
	}
}

var _ = Describe("The router of a Pipeline", Ordered, func() {
	It("runs two pods on two nodes with a disruption budget, and serves from the other when one pod's node dies", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter}
		})
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))

		By("spreading the two router pods over two nodes, behind a disruption budget")
		var pods []corev1.Pod
		Eventually(func(g Gomega) {
			pods = routerPods(ctx, p)
			g.Expect(pods).To(HaveLen(2))
			g.Expect(pods[0].Spec.NodeName).NotTo(BeEmpty())
			g.Expect(pods[1].Spec.NodeName).NotTo(BeEmpty())
		}).Should(Succeed())
		Expect(pods[0].Spec.NodeName).NotTo(Equal(pods[1].Spec.NodeName), "one node's failure must leave a router")
		Eventually(readyRouterEndpoints(ctx, p)).Should(ConsistOf(pods[0].Name, pods[1].Name))
		pdb := &policyv1.PodDisruptionBudget{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, pdb)).To(Succeed())
		Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1))

		By("stopping the node of one router pod: the Service sends everything to the other")
		dead, alive := pods[0], pods[1]
		DeferCleanup(func(ctx context.Context) {
			setKwokManaged(ctx, dead.Spec.NodeName, true)
			Eventually(nodeReady(ctx, dead.Spec.NodeName), 2*time.Minute).Should(Equal(corev1.ConditionTrue))
		})
		setKwokManaged(ctx, dead.Spec.NodeName, false)
		Eventually(nodeReady(ctx, dead.Spec.NodeName), 2*time.Minute).ShouldNot(Equal(corev1.ConditionTrue))
		Eventually(readyRouterEndpoints(ctx, p), 2*time.Minute).Should(ConsistOf(alive.Name))
		Consistently(readyRouterEndpoints(ctx, p), "3s").Should(ContainElement(alive.Name))
	})
})
