package pipeline

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
)

// createHostnameNode creates a ready node whose kubernetes.io/hostname label is hostname, and
// deletes it when the test ends.
func createHostnameNode(name, hostname string) {
	GinkgoHelper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: hostname}}}
	Expect(k8sClient.Create(context.Background(), node)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
	})
	setNodeReady(context.Background(), name, corev1.ConditionTrue, time.Now().Add(-time.Hour))
}

var _ = Describe("Node events through the cache indexes", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("reach the Pipelines whose steps or router may run on the node, by its hostname label or its name", func() {
		gone, fallback, routerNode := ns+"-gone", ns+"-fallback", ns+"-router"
		labelled, hostname := ns+"-labelled", ns+"-host"
		named := func(name string, edits ...func(*pipelinev1.Pipeline)) func(*pipelinev1.Pipeline) {
			return func(p *pipelinev1.Pipeline) {
				p.Name = name
				for _, e := range edits {
					e(p)
				}
			}
		}
		onFallback := createSample(ctx, ns, named("on-fallback", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Location, p.Spec.Steps[1].FallbackLocations = gone, []string{fallback}
		}))
		onRouter := createSample(ctx, ns, named("on-router", withRouter, func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath.Router.Location = routerNode
		}))
		// A v1beta1 client's router that is not enabled but has a location: v1 has no router
		// settings without dataPath.mode Router, so the Pipeline is stored with mode Chain and
		// the location only in its conversion data, which no node event reads.
		disabled, err := samples.PipelineV1beta1(ns)
		Expect(err).NotTo(HaveOccurred())
		disabled.Name = "router-disabled"
		disabled.Spec.Router = &pipelinev1beta1.Router{Location: routerNode}
		Expect(k8sClient.Create(ctx, disabled)).To(Succeed())
		stored := getPipeline(ctx, &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: disabled.Name}})
		Expect(stored.Spec.DataPath).To(Equal(&pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain}))
		onHostname := createSample(ctx, ns, named("on-hostname", func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Location = hostname }))
		onName := createSample(ctx, ns, named("on-name", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Location = labelled }))

		By("the manager's cache has the indexes (a field the cache does not index is refused)")
		Expect(mgrCache.List(ctx, &pipelinev1.PipelineList{}, client.MatchingFields{indexPipelineNodes: fallback})).To(Succeed())
		Expect(mgrCache.List(ctx, &corev1.NodeList{}, client.MatchingFields{nodes.IndexHostname: hostname})).To(Succeed())

		By("the controller's map function reads the Pipelines a node event concerns from the index")
		cached, err := client.New(cfg, client.Options{Scheme: testScheme, Cache: &client.CacheOptions{Reader: mgrCache}})
		Expect(err).NotTo(HaveOccurred())
		r := &Reconciler{Client: cached}
		requested := func(node *corev1.Node) func() []string {
			return func() []string {
				var out []string
				for _, req := range r.pipelinesOnNodeEvent(ctx, nil, node) {
					// The event of a ready node also concerns the Pipelines, of other tests here,
					// with a step any node may hold that may get a disruption budget (see
					// budgetsChangedBy).
					if req.Namespace == ns {
						out = append(out, req.Name)
					}
				}
				return out
			}
		}
		node := func(name, hostname string) *corev1.Node {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: hostname}}}
		}
		Eventually(requested(node(fallback, fallback))).Should(ConsistOf("on-fallback"))
		Eventually(requested(node(routerNode, routerNode))).Should(ConsistOf("on-router"), "not the Pipeline that runs no router")
		Eventually(requested(node(labelled, hostname))).Should(ConsistOf("on-hostname", "on-name"),
			"a node is named by its hostname label and by its name")
		Eventually(requested(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: hostname}})).Should(ConsistOf("on-hostname"),
			"a node without the label is named by its name")

		By("every step and the router wait for their missing nodes")
		Eventually(stepStatus(ctx, onFallback, 1)).Should(HaveField("Node", gone))
		Eventually(stepStatus(ctx, onHostname, 1)).Should(And(HaveField("Node", hostname), HaveField("NodeReady", Or(BeNil(), HaveValue(BeFalse())))))
		Eventually(func() string { return orEmpty(condition(ctx, onRouter, pipelinev1.ConditionDegraded)()).Message }).
			Should(ContainSubstring("router: node " + routerNode + " does not exist"))

		By("the nodes join: their events reach the Pipelines through the index")
		createHostnameNode(fallback, fallback)
		createHostnameNode(routerNode, routerNode)
		createHostnameNode(labelled, hostname)
		Eventually(nodeOf(ctx, onFallback, 1)).Should(Equal(fallback), "the step fails over to its fallback location")
		Eventually(stepStatus(ctx, onHostname, 1)).Should(HaveField("NodeReady", HaveValue(BeTrue())))
		Eventually(func() string { return orEmpty(condition(ctx, onRouter, pipelinev1.ConditionDegraded)()).Message }).
			ShouldNot(ContainSubstring("router: node " + routerNode))

		By("a location resolves to the node of that name, else to the one node with that hostname label")
		res, err := nodes.Resolve(ctx, mgrCache, hostname)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Found()).To(BeTrue())
		Expect(res.Name).To(Equal(labelled))
		res, err = nodes.Resolve(ctx, mgrCache, labelled)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Found()).To(BeTrue(), "the node named %s, whatever its hostname label", labelled)
		Expect(res.Name).To(Equal(labelled))
		Eventually(stepStatus(ctx, onName, 0)).Should(HaveField("NodeReady", HaveValue(BeTrue())))
		Eventually(nodeOf(ctx, onHostname, 1)).Should(Equal(labelled), "pinned by the name of the node the hostname label found")
		Eventually(nodeOf(ctx, onName, 0)).Should(Equal(labelled))
	})
})
