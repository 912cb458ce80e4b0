package pipeline

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// resourceVersions are the resource versions of the Pipelines in ns and of every child of them,
// by "Kind name".
func versionsIn(ctx context.Context, ns string, pipelines ...*pipelinev1.Pipeline) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	add := func(list client.ObjectList, opts ...client.ListOption) {
		Expect(k8sClient.List(ctx, list, opts...)).To(Succeed())
		for _, obj := range objects(list) {
			out[fmt.Sprintf("%T %s", obj, obj.GetName())] = obj.GetResourceVersion()
		}
	}
	inNamespace := client.InNamespace(ns)
	add(&pipelinev1.PipelineList{}, inNamespace)
	add(&appsv1.DeploymentList{}, inNamespace)
	add(&corev1.ServiceList{}, inNamespace)
	add(&corev1.PersistentVolumeClaimList{}, inNamespace)
	add(&networkingv1.NetworkPolicyList{}, inNamespace)
	for _, p := range pipelines {
		add(&corev1.PersistentVolumeList{}, volumeSelector(p))
	}
	return out
}

var _ = Describe("A new operator process", func() {
	It("makes no write to converged Pipelines and their children", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)

		By("converging Pipelines with a first manager")
		first := startOwnManager(ns, ownManagerOptions{})
		nfs := runningSample(ctx, ns, forOwnManagers(ns))
		byClass := runningSample(ctx, ns, forOwnManagers(ns), func(p *pipelinev1.Pipeline) {
			p.Name = "by-class"
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass,
				StorageClass: &pipelinev1.StorageClassStorage{Name: "fast"}}
		})
		Expect(first.counter.writes.Load()).To(BeNumerically(">", 0), "the count sees the first manager's writes")
		// Let the first manager finish whatever its last passes started.
		before := versionsIn(ctx, ns, nfs, byClass)
		Consistently(func() map[string]string { return versionsIn(ctx, ns, nfs, byClass) }).Should(Equal(before))
		// Pipelines, Deployments, Services, claims, the volume, the steps' NetworkPolicies.
		Expect(before).To(HaveLen(2 + 4 + 4 + 2 + 1 + 2))
		first.stop()

		By("starting a fresh manager: new cache, new connections")
		second := startOwnManager(ns, ownManagerOptions{})
		Eventually(second.passes.Load).Should(BeNumerically(">=", 2), "the new manager reconciled both Pipelines")
		Consistently(second.counter.writes.Load).Should(BeZero())
		Expect(versionsIn(ctx, ns, nfs, byClass)).To(Equal(before))
	})
})
