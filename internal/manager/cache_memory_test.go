package manager

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// Anyone who may create a ConfigMap or a Deployment may put the operator's managed-by label on
// it, and the manager's cache selects its children by that label. Objects no Pipeline controls,
// and the data of every ConfigMap, must not cost the manager memory: the heap that the
// manager's cache takes for them is compared with that of a cache selecting the same objects
// by the same label without the operator's transforms, in the same run.
var _ = Describe("The manager's cache", func() {
	const (
		foreign = 60
		owned   = 30
		size    = 512 << 10
	)

	It("does not grow with labelled objects it does not own, nor with ConfigMap data", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		p := testenv.Sample(GinkgoT(), ns)
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		// Other specs count the cluster's Pipelines.
		DeferCleanup(func(ctx SpecContext) { Expect(k8sClient.Delete(ctx, p)).To(Succeed()) })
		owner := metav1.OwnerReference{APIVersion: pipelinev1.GroupVersion.String(), Kind: "Pipeline",
			Name: p.Name, UID: p.UID, Controller: ptr.To(true)}
		labels := map[string]string{resources.LabelManagedBy: resources.ManagedBy, resources.LabelPipeline: p.Name}
		payload := strings.Repeat("x", size)
		for i := range foreign {
			Expect(k8sClient.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("foreign-%d", i), Namespace: ns, Labels: labels},
				Data:       map[string]string{"payload": payload},
			})).To(Succeed())
		}
		for i := range owned {
			Expect(k8sClient.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("owned-%d", i), Namespace: ns, Labels: labels,
					OwnerReferences: []metav1.OwnerReference{owner}},
				Data: map[string]string{"payload": payload},
			})).To(Succeed())
		}
		Expect(k8sClient.Create(ctx, foreignDeployment(ns, labels, payload[:200<<10]))).To(Succeed())
		objects := foreign + owned

		plain := apply.CacheOptions()
		for obj, by := range plain.ByObject {
			plain.ByObject[obj] = cache.ByObject{Label: by.Label}
		}
		plain.DefaultTransform = nil
		baseline, _ := heapOfCache(ctx, plain, ns, objects)
		hardened, c := heapOfCache(ctx, apply.CacheOptions(), ns, objects)
		GinkgoWriter.Printf("heap of %d labelled ConfigMaps of %d KiB: %d KiB without the transforms, %d KiB with them\n",
			objects, size>>10, baseline>>10, hardened>>10)
		Expect(baseline).To(BeNumerically(">", int64(objects*size)),
			"without the transforms the cache holds every labelled ConfigMap's data")
		Expect(hardened).To(BeNumerically("<", baseline/10),
			"the cache holds neither the foreign objects nor any ConfigMap's data")

		By("keeping what the operator needs of what it owns, and only the identity of the rest")
		cm := &corev1.ConfigMap{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "owned-0"}, cm)).To(Succeed())
		Expect(cm.Data).To(BeNil())
		Expect(cm.Labels).To(Equal(labels))
		Expect(cm.Annotations).To(HaveKeyWithValue(apply.AnnotationCachedDataDigest, apply.DataDigest(map[string]string{"payload": payload}, nil)))
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "foreign-0"}, cm)).To(Succeed())
		Expect(cm.Labels).To(BeEmpty())
		Expect(cm.OwnerReferences).To(BeEmpty())
		d := &appsv1.Deployment{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "foreign"}, d)).To(Succeed())
		Expect(d.Spec.Template.Annotations).To(BeEmpty())
	}, SpecTimeout(3*60e9))
})

// foreignDeployment is a Deployment that carries the operator's labels and a large pod template.
func foreignDeployment(ns string, labels map[string]string, payload string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foreign"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "foreign"}, Annotations: map[string]string{"payload": payload}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/c"}}},
			},
		},
	}
}

// heapOfCache starts a cache with opts, waits until it holds the objects ConfigMaps of ns, and
// returns the growth of the live heap it caused, with the cache, still running until ctx ends.
func heapOfCache(ctx context.Context, opts cache.Options, ns string, objects int) (int64, cache.Cache) {
	GinkgoHelper()
	opts.Scheme = testScheme
	before := liveHeap()
	c, err := cache.New(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	// The informers the manager starts for the children.
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}} {
		_, err := c.GetInformer(ctx, obj)
		Expect(err).NotTo(HaveOccurred())
	}
	cacheCtx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	go func() {
		defer GinkgoRecover()
		Expect(c.Start(cacheCtx)).To(Succeed())
	}()
	Expect(c.WaitForCacheSync(ctx)).To(BeTrue())
	Eventually(func(g Gomega) {
		list := &corev1.ConfigMapList{}
		g.Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(objects))
	}).Should(Succeed())
	return int64(liveHeap()) - int64(before), c
}

// liveHeap is the heap in use after a full garbage collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
