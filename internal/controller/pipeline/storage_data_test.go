package pipeline

import (
	"context"
	"maps"
	"strconv"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// The model storage holds data the operator cannot make again: these tests guard that no spec
// change and no deletion of a Pipeline takes the models of a claim with it, and that replaced
// NFS storage is removed only once no step mounts it.
var _ = Describe("Model storage data", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("keeps the user's claim when the Pipeline that mounts it is deleted", func() {
		claim := userClaim(ctx, ns, "team-models")
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim,
				ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: claim.Name}}
		})
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		Eventually(func() bool { return gone(ctx, &pipelinev1.Pipeline{}, ns, p.Name) }).Should(BeTrue())

		// No garbage collector runs here: an owner reference would be the claim's end in a cluster.
		Consistently(func(g Gomega) { expectIntact(ctx, g, claim) }, "2s").Should(Succeed())
	})

	It("keeps the user's claim when the Pipeline moves to another claim", func() {
		first, second := userClaim(ctx, ns, "models-a"), userClaim(ctx, ns, "models-b")
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim,
				ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: first.Name}}
		})
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.ExistingClaim.Name = second.Name })

		// The pass that applied the new spec, its stale pass included, has succeeded.
		Eventually(func(g Gomega) {
			latest := getPipeline(ctx, p)
			g.Expect(latest.Status.ObservedGeneration).To(Equal(latest.Generation))
			g.Expect(latest.Status.Storage.ClaimName).To(Equal(second.Name))
			for i := range latest.Spec.Steps {
				g.Expect(mountedClaim(deploymentOf(ctx, latest, i))).To(Equal(second.Name))
			}
		}).Should(Succeed())
		Consistently(func(g Gomega) { expectIntact(ctx, g, first) }, "2s").Should(Succeed())
	})

	It("moves every step onto new NFS storage before it deletes the old volume and claim", func() {
		p := runningSample(ctx, ns)
		oldPV, oldPVC := resources.PVName(p), resources.ClaimName(p)
		edit := func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS.Server = "10.0.0.3" }
		moved := p.DeepCopy()
		edit(moved)
		newPVC := resources.ClaimName(moved)
		Expect(newPVC).NotTo(Equal(oldPVC))

		switched := watchRevisions(ctx, &appsv1.DeploymentList{}, func(_ watch.EventType, o client.Object) (string, bool) {
			d, ok := o.(*appsv1.Deployment)
			return o.GetName(), ok && mountedClaim(d) == newPVC
		}, client.InNamespace(ns), client.MatchingLabels{resources.LabelPipeline: p.Name})
		claimDeleted := watchRevisions(ctx, &corev1.PersistentVolumeClaimList{}, deletionOf(oldPVC), client.InNamespace(ns))
		volumeDeleted := watchRevisions(ctx, &corev1.PersistentVolumeList{}, deletionOf(oldPV), volumeSelector(p))

		updatePipeline(ctx, p, edit)
		Eventually(func(g Gomega) {
			g.Expect(switched.get()).To(HaveLen(len(p.Spec.Steps)), "every step mounts %s", newPVC)
			g.Expect(claimDeleted.get()).To(HaveKey(oldPVC))
			g.Expect(volumeDeleted.get()).To(HaveKey(oldPV))
		}).Should(Succeed())

		// envtest's apiserver stores into one etcd, whose revision (the resourceVersion) orders
		// every write of every kind: each step's move must come before either deletion.
		claimRev, volumeRev := claimDeleted.get()[oldPVC], volumeDeleted.get()[oldPV]
		for name, rev := range switched.get() {
			Expect(rev).To(BeNumerically("<", claimRev), "Deployment %s moved to %s after claim %s was deleted", name, newPVC, oldPVC)
			Expect(rev).To(BeNumerically("<", volumeRev), "Deployment %s moved to %s after volume %s was deleted", name, newPVC, oldPV)
		}
		bindStorage(ctx, moved)
		rollOut(ctx, moved)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	})

	It("keeps a claim a StorageClass provisioned, whatever the spec says now", func() {
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass,
				StorageClass: &pipelinev1.StorageClassStorage{Name: "fast", Capacity: ptr.To(resource.MustParse("5Gi"))}}
		})

		By("the apiserver itself refusing a new capacity: no webhook runs here, the CRD's rule does")
		bigger := getPipeline(ctx, p)
		bigger.Spec.ModelStorage.StorageClass.Capacity = ptr.To(resource.MustParse("10Gi"))
		err := k8sClient.Update(ctx, bigger)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		Expect(err.Error()).To(ContainSubstring("modelStorage of type StorageClass cannot change"))

		By("keeping the claim of an earlier spec, stored before admission refused such a change")
		earlier := p.DeepCopy()
		earlier.Spec.ModelStorage.StorageClass.Capacity = ptr.To(resource.MustParse("2Gi"))
		Expect(resources.ClaimName(earlier)).NotTo(Equal(resources.ClaimName(p)))
		Expect(k8sClient.Apply(ctx, resources.PVC(earlier, ""), client.FieldOwner(apply.FieldManager))).To(Succeed())
		left := child(ctx, &corev1.PersistentVolumeClaim{}, ns, resources.ClaimName(earlier))
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Image = "nginx:1.27" })
		Eventually(func(g Gomega) {
			latest := getPipeline(ctx, p)
			g.Expect(latest.Status.ObservedGeneration).To(Equal(latest.Generation), "the pass of the new spec, stale pass included, succeeded")
		}).Should(Succeed())
		Consistently(func(g Gomega) { expectIntact(ctx, g, left) }, "2s").Should(Succeed())
		Expect(mountedClaim(deploymentOf(ctx, p, 0))).To(Equal(resources.ClaimName(p)))
	})
})

// userClaim creates a bound claim name in ns, as a user makes one for ExistingClaim storage.
func userClaim(ctx context.Context, ns, name string) *corev1.PersistentVolumeClaim {
	GinkgoHelper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	Expect(k8sClient.Create(ctx, claim)).To(Succeed())
	claim.Status.Phase = corev1.ClaimBound
	Expect(k8sClient.Status().Update(ctx, claim)).To(Succeed())
	return claim
}

// expectIntact expects claim to exist, not being deleted, with no owner that would take it along.
func expectIntact(ctx context.Context, g Gomega, claim *corev1.PersistentVolumeClaim) {
	now := &corev1.PersistentVolumeClaim{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(claim), now)).To(Succeed())
	g.Expect(now.UID).To(Equal(claim.UID), "the same claim, not one made again")
	g.Expect(now.DeletionTimestamp).To(BeNil())
	g.Expect(now.OwnerReferences).To(Equal(claim.OwnerReferences))
}

// mountedClaim is the claim of the model volume a step's Deployment mounts.
func mountedClaim(d *appsv1.Deployment) string {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == resources.ModelVolumeName && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// deletionOf matches the event that deletes the object name: its deletion timestamp is set
// (finalizers hold it), or it is gone.
func deletionOf(name string) func(watch.EventType, client.Object) (string, bool) {
	return func(t watch.EventType, o client.Object) (string, bool) {
		return name, o.GetName() == name && (t == watch.Deleted || o.GetDeletionTimestamp() != nil)
	}
}

// revisions are the resourceVersions at which a watch first saw each of the things it looks for.
type revisions struct {
	mu    sync.Mutex
	first map[string]uint64
}

func (r *revisions) get() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.first)
}

// watchRevisions watches the objects of list's kind that opts select, from their present
// state on, and records the resourceVersion of the first event for which seen reports a key.
func watchRevisions(ctx context.Context, list client.ObjectList, seen func(watch.EventType, client.Object) (string, bool),
	opts ...client.ListOption) *revisions {
	GinkgoHelper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: testScheme})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, list, opts...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(w.Stop)
	r := &revisions{first: map[string]uint64{}}
	go func() {
		defer GinkgoRecover()
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			key, match := seen(ev.Type, obj)
			if !match {
				continue
			}
			rev, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
			Expect(err).NotTo(HaveOccurred())
			r.mu.Lock()
			if _, done := r.first[key]; !done {
				r.first[key] = rev
			}
			r.mu.Unlock()
		}
	}()
	return r
}
