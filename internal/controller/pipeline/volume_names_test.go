package pipeline

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// earlierVolumeName is the name an earlier version gave the model PersistentVolume of p (a
// Pipeline with a short name): namespace, name and the 8-digit storage key, which ends the
// claim's name, joined with '-'.
func earlierVolumeName(p *pipelinev1.Pipeline) string {
	claim := resources.ClaimName(p)
	return p.Namespace + "-" + p.Name + "-" + claim[strings.LastIndex(claim, "-")+1:]
}

// pausedSample is the sample, created paused: the operator leaves its children to the test.
func pausedSample(ctx context.Context, ns string) *pipelinev1.Pipeline {
	GinkgoHelper()
	p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) { p.Spec.Paused = ptr.To(true) })
	Eventually(func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionReconciled)()).Reason }).
		Should(Equal(pipelinev1.ReasonPaused))
	return getPipeline(ctx, p)
}

var _ = Describe("Model volume names", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("keeps the bound volume an earlier version named, and names a new Pipeline's by the full hash", func() {
		By("a Pipeline of an earlier version, with its volume and claim bound (the Pipeline paused meanwhile)")
		p := pausedSample(ctx, ns)
		earlier := earlierVolumeName(p)
		Expect(earlier).NotTo(Equal(resources.PVName(p)))
		for _, obj := range []runtime.ApplyConfiguration{resources.PV(p, earlier, resources.InlineVolumeSource(p)), resources.PVC(p, earlier)} {
			stamped, err := apply.Stamped(obj)
			Expect(err).NotTo(HaveOccurred())
			Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(stamped), client.FieldOwner(apply.FieldManager))).To(Succeed())
		}
		pv := child(ctx, &corev1.PersistentVolume{}, "", earlier)
		pv.Status.Phase = corev1.VolumeBound
		Expect(k8sClient.Status().Update(ctx, pv)).To(Succeed())
		pvc := child(ctx, &corev1.PersistentVolumeClaim{}, ns, resources.ClaimName(p))
		pvc.Status.Phase = corev1.ClaimBound
		Expect(k8sClient.Status().Update(ctx, pvc)).To(Succeed())
		pv = child(ctx, &corev1.PersistentVolume{}, "", earlier)

		By("this version reconciles it")
		setPaused(ctx, p, false)
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(getPipeline(ctx, p).Status.Storage.VolumeName).To(Equal(earlier))
		Consistently(func() *corev1.PersistentVolume { return child(ctx, &corev1.PersistentVolume{}, "", earlier) }, "2s").Should(And(
			HaveField("ObjectMeta.ResourceVersion", pv.ResourceVersion),
			HaveField("ObjectMeta.DeletionTimestamp", BeNil())), "the volume is kept as it is: not written, not deleted")
		Expect(gone(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))).To(BeTrue(), "no volume of the new name is made")
		Expect(child(ctx, &corev1.PersistentVolumeClaim{}, ns, resources.ClaimName(p)).Spec.VolumeName).To(Equal(earlier))

		By("a change of the storage gets a volume of the new name, and the earlier one goes")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS.Path = "/srv/models" })
		p = getPipeline(ctx, p)
		Eventually(func() string { return getPipeline(ctx, p).Status.Storage.VolumeName }).Should(Equal(resources.PVName(p)))
		bindStorage(ctx, p)
		rollOut(ctx, p)
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", earlier) }).Should(BeTrue())

		By("a new Pipeline gets the name with the full hash")
		fresh := createSample(ctx, ns, func(p *pipelinev1.Pipeline) { p.Name = "fresh" })
		name := resources.PVName(fresh)
		Expect(name).To(MatchRegexp("^" + ns + "-fresh-[0-9a-f]{64}$"))
		Expect(child(ctx, &corev1.PersistentVolume{}, "", name).Spec.ClaimRef.Name).To(Equal(resources.ClaimName(fresh)))
		Expect(child(ctx, &corev1.PersistentVolumeClaim{}, ns, resources.ClaimName(fresh)).Spec.VolumeName).To(Equal(name))
		Eventually(func() string { return getPipeline(ctx, fresh).Status.Storage.VolumeName }).Should(Equal(name))
	})

	It("does not keep a volume that was made for another Pipeline", func() {
		p := pausedSample(ctx, ns)
		earlier := earlierVolumeName(p)
		By("the claim is bound by name to a volume labelled for a Pipeline of another namespace")
		other := p.DeepCopy()
		other.Namespace = ns + "-other"
		squatter := resources.PV(other, earlier, resources.InlineVolumeSource(other))
		Expect(k8sClient.Apply(ctx, squatter, client.FieldOwner("someone"))).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: earlier}}))).To(Succeed())
		})
		Expect(k8sClient.Apply(ctx, resources.PVC(p, earlier), client.FieldOwner(apply.FieldManager))).To(Succeed())

		setPaused(ctx, p, false)
		Eventually(func() string { return getPipeline(ctx, p).Status.Storage.VolumeName }).Should(Equal(resources.PVName(p)))
		Expect(child(ctx, &corev1.PersistentVolume{}, "", earlier).Labels).To(HaveKeyWithValue(resources.LabelPipelineNamespace, other.Namespace),
			"someone else's volume is left alone")
	})
})
