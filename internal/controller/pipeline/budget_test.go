package pipeline

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// stepPod is a ready pod of step i of p running on node, as the scheduler and the kubelet would
// have made it. Ready matters: the budget lets pods that are not ready go at once.
func stepPod(ctx context.Context, p *pipelinev1.Pipeline, i int, name, node string) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace, Labels: resources.StepLabels(p, i)},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "step", Image: p.Spec.Steps[i].Image}}},
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
	return pod
}

// evict asks the apiserver to evict pod, as kubectl drain does.
func evict(ctx context.Context, pod *corev1.Pod) error {
	return k8sClient.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}})
}

// labelNode sets label key=value on node name.
func labelNode(ctx context.Context, name, key, value string) {
	GinkgoHelper()
	Eventually(func() error {
		node := &corev1.Node{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		node.Labels[key] = value
		return k8sClient.Update(ctx, node)
	}).Should(Succeed())
}

var _ = Describe("A step's disruption budget", func() {
	It("exists only while two schedulable nodes can hold the step's pods, so that it never blocks a drain", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		nodeA, nodeB := ns+"-pool-a", ns+"-pool-b"
		for _, n := range []string{nodeA, nodeB} {
			createNode(n)
			DeferCleanup(func(ctx context.Context) {
				Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}))).To(Succeed())
			})
		}
		labelNode(ctx, nodeA, "pool", ns)
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Location = ""
			p.Spec.Steps[1].Replicas = ptr.To[int32](2)
			p.Spec.Steps[1].NodeSelector = map[string]string{"pool": ns}
		})
		name := resources.StepObjectName(p, 1)
		budget := func() bool { return !gone(ctx, &policyv1.PodDisruptionBudget{}, ns, name) }

		By("its nodeSelector confines both pods to one node: no budget")
		Consistently(budget, "2s").Should(BeFalse())

		By("a drain of that node evicts the step's pods: nothing holds it")
		Expect(evict(ctx, stepPod(ctx, p, 1, "drain-1", nodeA))).To(Succeed())
		Expect(evict(ctx, stepPod(ctx, p, 1, "drain-2", nodeA))).To(Succeed())

		By("a second node joins the pool: the step gets its budget")
		labelNode(ctx, nodeB, "pool", ns)
		Eventually(budget).Should(BeTrue())

		By("the second node is cordoned: one schedulable node left, the budget goes and is not made again")
		cordon(ctx, nodeB, true)
		Eventually(budget).Should(BeFalse())
		Consistently(budget, "2s").Should(BeFalse())
		Expect(evict(ctx, stepPod(ctx, p, 1, "drain-3", nodeA))).To(Succeed())
	})
})
