package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// The cache keeps of a child only the operator's metadata, and of a child larger than
// apply.MaxCachedChildBytes only a summary: neither may cost a write that the whole child in
// the cache would not, and drift in what the cache does not hold is still repaired.
var _ = Describe("Children the cache keeps only in part", func() {
	It("cost no write for what tenants add to them, and are repaired once when edited", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		m := startOwnManager(ns, ownManagerOptions{})
		p := runningSample(ctx, ns, forOwnManagers(ns), func(p *pipelinev1.Pipeline) {
			for i := range 4 {
				p.Spec.Steps[0].Env = append(p.Spec.Steps[0].Env,
					corev1.EnvVar{Name: fmt.Sprintf("CONFIG_%d", i), Value: strings.Repeat("c", 8<<10)})
			}
		})
		large := client.ObjectKey{Namespace: ns, Name: resources.StepObjectName(p, 0)}
		Eventually(func(g Gomega) {
			cached := &appsv1.Deployment{}
			g.Expect(m.mgr.GetCache().Get(ctx, large, cached)).To(Succeed())
			g.Expect(apply.IsSummary(cached)).To(BeTrue(), "the first step's Deployment is larger than the cache keeps")
		}).Should(Succeed())
		// settled is the versions of everything once nothing has changed for a while: the status
		// may still take a write or two after the phase is Running.
		settled := func() map[string]string {
			GinkgoHelper()
			var before map[string]string
			Eventually(func(g Gomega) {
				before = versionsIn(ctx, ns, p)
				g.Consistently(func() map[string]string { return versionsIn(ctx, ns, p) }).Should(Equal(before))
			}).Should(Succeed())
			return before
		}

		By("padding the Pipeline and its Deployments and Services with annotations and labels of the tenant's")
		labels := map[string]any{}
		for i := range 200 {
			labels[fmt.Sprintf("tenant.example.com/label-%03d", i)] = strings.Repeat("y", 63)
		}
		pad := func(obj client.Object, fill string) {
			GinkgoHelper()
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
				"annotations": map[string]any{"tenant.example.com/padding": strings.Repeat(fill, 200<<10)}, "labels": labels}})
			Expect(err).NotTo(HaveOccurred())
			Expect(k8sClient.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		}
		pad(getPipeline(ctx, p), "x")
		for i := range p.Spec.Steps {
			pad(deploymentOf(ctx, p, i), "x")
			pad(serviceOf(ctx, p, i), "x")
		}
		// A Deployment's annotations are copied to its ReplicaSets: a change of them is a new
		// generation, which the deployment controller rolls out.
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		padded := settled()
		writes := m.counter.writes.Load()

		By("padding them again: every change starts a pass, and no pass writes")
		pad(getPipeline(ctx, p), "z")
		for i := range p.Spec.Steps {
			pad(serviceOf(ctx, p, i), "z")
		}
		Consistently(m.counter.writes.Load).Should(Equal(writes), "the operator writes nothing over what tenants add")
		Expect(deploymentOf(ctx, p, 0).Annotations).To(HaveKey("tenant.example.com/padding"), "nor removes it")
		Expect(deploymentOf(ctx, p, 0).ResourceVersion).To(Equal(padded["*v1.Deployment "+large.Name]))

		By("editing the image of the summarized Deployment")
		d := deploymentOf(ctx, p, 0)
		d.Spec.Template.Spec.Containers[0].Image = "example.com/other:1"
		Expect(k8sClient.Update(ctx, d)).To(Succeed())
		Eventually(func() string { return deploymentOf(ctx, p, 0).Spec.Template.Spec.Containers[0].Image }).
			Should(Equal(p.Spec.Steps[0].Image), "the edit is repaired: the comparison reads the whole child")
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		repaired := settled()
		Expect(repaired).To(HaveLen(len(padded)))
		writes = m.counter.writes.Load()
		Consistently(m.counter.writes.Load).Should(Equal(writes), "repaired once, not rewritten on every pass")

		By("starting a fresh manager: a new cache, built from the padded and the large children")
		m.stop()
		second := startOwnManager(ns, ownManagerOptions{})
		Eventually(second.passes.Load).Should(BeNumerically(">=", 1))
		Consistently(second.counter.writes.Load).Should(BeZero())
		Expect(versionsIn(ctx, ns, p)).To(Equal(repaired))
	})
})
