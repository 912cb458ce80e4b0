package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// A tenant who may edit the objects of their namespace may write into their Pipelines and into
// the Pipelines' own children as much as the apiserver accepts: annotations up to 256 KiB per
// object, labels, the pod template of a Deployment. The manager's cache must not grow with it:
// the heap a cache with the operator's options takes for a tenant's Pipelines and children is
// measured before and after they are padded with tens of MiB, in the same run, beside that of
// a cache without the operator's transforms, which holds all of it.
var _ = Describe("The manager's cache, with what tenants write", func() {
	const (
		pipelines  = 10
		annotation = 240 << 10 // under the apiserver's 256 KiB of annotations per object
		labels     = 800       // of 127 bytes each: about 100 KiB per object
		sidecarEnv = 300 << 10 // in a container of the tenant's, added to a step's Deployment
	)

	It("does not grow with what tenants write into their Pipelines and the Pipelines' children", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		// Each Pipeline with its children as the operator makes them: what the builders describe,
		// stamped, created under its field manager.
		groups := make([][]client.Object, pipelines)
		objects := 0
		for i := range groups {
			p := testenv.Sample(GinkgoT(), ns)
			p.Name, p.UID = fmt.Sprintf("tenant-%d", i), ""
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			groups[i] = append(groups[i], p)
			desired := []runtime.ApplyConfiguration{resources.PVC(p, "")}
			for s := range p.Spec.Steps {
				desired = append(desired, resources.StepDeployment(p, s, "", "", ""), resources.StepService(p, s))
			}
			for _, d := range desired {
				u, err := apply.Stamped(d)
				Expect(err).NotTo(HaveOccurred())
				Expect(k8sClient.Create(ctx, u, client.FieldOwner(apply.FieldManager))).To(Succeed())
				groups[i] = append(groups[i], u)
			}
			objects += len(groups[i])
		}
		DeferCleanup(func(ctx SpecContext) {
			// Other specs count the cluster's Pipelines.
			Expect(k8sClient.DeleteAllOf(ctx, &pipelinev1.Pipeline{}, client.InNamespace(ns))).To(Succeed())
		})
		kinds := []client.Object{&pipelinev1.Pipeline{}, &appsv1.Deployment{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{}}

		padding := strings.Repeat("x", annotation)
		padLabels := map[string]any{}
		for i := range labels {
			padLabels[fmt.Sprintf("tenant.example.com/label-%04d", i)] = strings.Repeat("y", 63)
		}
		// pad writes into obj as much as the apiserver accepts of a tenant, and returns how much.
		pad := func(obj client.Object) int {
			patch := map[string]any{"metadata": map[string]any{
				"annotations": map[string]any{"tenant.example.com/padding": padding},
				"labels":      padLabels,
			}}
			written := annotation + labels*127
			if obj.GetObjectKind().GroupVersionKind().Kind == "Deployment" {
				d := &appsv1.Deployment{}
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), d)).To(Succeed())
				sidecar := corev1.Container{Name: "sidecar", Image: "example.com/sidecar"}
				for j := range 30 {
					sidecar.Env = append(sidecar.Env, corev1.EnvVar{Name: fmt.Sprintf("PADDING_%d", j), Value: padding[:sidecarEnv/30]})
				}
				patch["spec"] = map[string]any{"template": map[string]any{
					"metadata": map[string]any{"annotations": map[string]any{"tenant.example.com/padding": padding}},
					"spec":     map[string]any{"containers": append(d.Spec.Template.Spec.Containers, sidecar)},
				}}
				written += annotation + sidecarEnv
			}
			data, err := json.Marshal(patch)
			Expect(err).NotTo(HaveOccurred())
			Expect(k8sClient.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))).To(Succeed())
			return written
		}

		// The stream that watches a kind reads each object whole: its buffer grows to the largest
		// object of the kind it has read, once per kind whatever the number of objects. The first
		// Pipeline and its children are padded before the baseline, which then holds those buffers.
		for _, obj := range groups[0] {
			pad(obj)
		}
		// Each figure is the least of two caches built alike: what else the test process
		// allocates meanwhile (other specs' goroutines, the client's buffers) only adds to a
		// measurement, and a 1% bound leaves room for little of it.
		operatorCache := func() int64 {
			return min(heapOfNamespaceCache(ctx, apply.CacheOptions(), ns, kinds, objects),
				heapOfNamespaceCache(ctx, apply.CacheOptions(), ns, kinds, objects))
		}
		baseline := operatorCache()

		By("padding every other Pipeline and child")
		written := 0
		for _, group := range groups[1:] {
			for _, obj := range group {
				written += pad(obj)
			}
		}
		padded := operatorCache()
		plain := apply.CacheOptions()
		for obj, by := range plain.ByObject {
			plain.ByObject[obj] = cache.ByObject{Label: by.Label}
		}
		plain.DefaultTransform = nil
		whole := heapOfNamespaceCache(ctx, plain, ns, kinds, objects)
		GinkgoWriter.Printf("%d of %d objects (%d Pipelines and their children) padded with %d MiB: heap of the operator's cache %d KiB before, "+
			"%d KiB after (%d B per object before, %d B after); of a cache without its transforms %d KiB\n",
			objects-len(groups[0]), objects, pipelines-1, written>>20, baseline>>10, padded>>10,
			baseline/int64(objects), padded/int64(objects), whole>>10)
		Expect(whole).To(BeNumerically(">", int64(written)), "without the transforms the cache holds what the tenant wrote")
		Expect(padded-baseline).To(BeNumerically("<", int64(written)/100),
			"the operator's cache holds nothing of what the tenant wrote: it grows by less than 1% of it")
	}, SpecTimeout(5*60e9))

	It("keeps of a padded child what the operator reads, and only a summary of one too large", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		p := testenv.Sample(GinkgoT(), ns)
		p.UID = ""
		p.Annotations = map[string]string{"tenant.example.com/padding": strings.Repeat("x", annotation), pipelinev1.PausedAnnotation: "true"}
		p.Labels = map[string]string{"team": "vision"}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(k8sClient.Delete(ctx, p)).To(Succeed()) })

		step, err := apply.Stamped(resources.StepDeployment(p, 0, "", "", ""))
		Expect(err).NotTo(HaveOccurred())
		step.SetAnnotations(map[string]string{apply.AnnotationAppliedHash: step.GetAnnotations()[apply.AnnotationAppliedHash],
			"tenant.example.com/padding": strings.Repeat("x", annotation)})
		Expect(k8sClient.Create(ctx, step, client.FieldOwner(apply.FieldManager))).To(Succeed())
		// A child larger than the cache keeps whole, whoever made it so.
		stamped, err := apply.Stamped(resources.StepDeployment(p, 1, "", "", ""))
		Expect(err).NotTo(HaveOccurred())
		large := &appsv1.Deployment{}
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(stamped.Object, large)).To(Succeed())
		c0 := &large.Spec.Template.Spec.Containers[0]
		c0.Env = append(c0.Env, corev1.EnvVar{Name: "PADDING", Value: strings.Repeat("x", apply.MaxCachedChildBytes)})
		Expect(k8sClient.Create(ctx, large, client.FieldOwner(apply.FieldManager))).To(Succeed())

		opts := apply.CacheOptions()
		opts.Scheme = testScheme
		opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
		c, err := cache.New(cfg, opts)
		Expect(err).NotTo(HaveOccurred())
		cacheCtx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			Expect(c.Start(cacheCtx)).To(Succeed())
		}()

		cached := &pipelinev1.Pipeline{}
		Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(p), cached) }).Should(Succeed())
		Expect(cached.Annotations).To(Equal(map[string]string{pipelinev1.PausedAnnotation: "true"}))
		Expect(cached.Labels).To(BeEmpty())
		stored := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), stored)).To(Succeed())
		Expect(cached.Spec).To(Equal(stored.Spec))

		d := &appsv1.Deployment{}
		Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(step), d) }).Should(Succeed())
		Expect(d.Annotations).To(HaveKeyWithValue(apply.AnnotationAppliedHash, step.GetAnnotations()[apply.AnnotationAppliedHash]))
		Expect(d.Annotations).NotTo(HaveKey("tenant.example.com/padding"))
		Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
		Expect(apply.IsSummary(d)).To(BeFalse())

		Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(large), d) }).Should(Succeed())
		Expect(apply.IsSummary(d)).To(BeTrue())
		Expect(d.Spec.Template.Spec.Containers).To(BeEmpty())
		Expect(resources.OwnedBy(stored, d)).To(BeTrue(), "the summary still says whose child it is")
	}, SpecTimeout(60e9))
})

// heapOfNamespaceCache starts a cache with opts over namespace ns, waits until it holds objects
// objects of kinds there, and returns the growth of the live heap it caused; the cache is
// stopped before it returns.
func heapOfNamespaceCache(ctx context.Context, opts cache.Options, ns string, kinds []client.Object, objects int) int64 {
	GinkgoHelper()
	opts.Scheme = testScheme
	opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	before := liveHeap()
	c, err := cache.New(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	for _, obj := range kinds {
		_, err := c.GetInformer(ctx, obj)
		Expect(err).NotTo(HaveOccurred())
	}
	cacheCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		defer GinkgoRecover()
		Expect(c.Start(cacheCtx)).To(Succeed())
	}()
	Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
	Eventually(func(g Gomega) {
		n := 0
		for _, l := range []client.ObjectList{&pipelinev1.PipelineList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.PersistentVolumeClaimList{}} {
			g.Expect(c.List(ctx, l, client.InNamespace(ns))).To(Succeed())
			n += meta.LenList(l)
		}
		g.Expect(n).To(Equal(objects))
	}).Should(Succeed())
	return int64(liveHeap()) - int64(before)
}
