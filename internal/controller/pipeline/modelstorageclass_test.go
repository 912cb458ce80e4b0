package pipeline

import (
	"context"
	"errors"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// publishedLabel is the namespace label the test classes select.
const publishedLabel = "models.distri-infer.ndsl.cn/shared"

// createClass creates the cluster-scoped ModelStorageClass name with spec, removed after the test.
func createClass(ctx context.Context, name string, spec pipelinev1.ModelStorageClassSpec) *pipelinev1.ModelStorageClass {
	GinkgoHelper()
	c := &pipelinev1.ModelStorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	Expect(k8sClient.Create(ctx, c)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, c))).To(Succeed())
	})
	return c
}

// selecting is a namespaceSelector that selects the namespaces labelled publishedLabel=ns.
func selecting(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{publishedLabel: ns}}
}

// labelNamespace sets label key=value on namespace ns ("" removes it).
func labelNamespace(ctx context.Context, ns, key, value string) {
	GinkgoHelper()
	Eventually(func() error {
		n := &corev1.Namespace{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			return err
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		if value == "" {
			delete(n.Labels, key)
		} else {
			n.Labels[key] = value
		}
		return k8sClient.Update(ctx, n)
	}).Should(Succeed())
}

// fromClass makes the storage of a Pipeline the ModelStorageClass name.
func fromClass(name string) func(*pipelinev1.Pipeline) {
	return func(p *pipelinev1.Pipeline) {
		p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
			ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: name}}
	}
}

var _ = Describe("Storage from a ModelStorageClass", func() {
	var (
		ctx   context.Context
		ns    string
		class string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
		class = ns + "-models"
		labelNamespace(ctx, ns, publishedLabel, ns)
	})

	It("makes the volume from the class's NFS export, bound to the Pipeline's claim", func() {
		createClass(ctx, class, pipelinev1.ModelStorageClassSpec{
			NFS:          &pipelinev1.NFSModelStorageSource{Server: "nfs.models.example.com", Path: "/exports/models"},
			MountOptions: []string{"nfsvers=4.1", "hard"}, NamespaceSelector: selecting(ns)})
		p := runningSample(ctx, ns, fromClass(class))

		pv := child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))
		Expect(pv.Spec.NFS).To(Equal(&corev1.NFSVolumeSource{Server: "nfs.models.example.com", Path: "/exports/models", ReadOnly: true}))
		Expect(pv.Spec.CSI).To(BeNil())
		Expect(pv.Spec.MountOptions).To(Equal([]string{"nfsvers=4.1", "hard"}))
		Expect(pv.Spec.AccessModes).To(Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}))
		Expect(pv.Spec.ClaimRef).NotTo(BeNil())
		Expect(pv.Spec.ClaimRef.Namespace).To(Equal(ns))
		Expect(pv.Spec.ClaimRef.Name).To(Equal(resources.ClaimName(p)))
		pvc := child(ctx, &corev1.PersistentVolumeClaim{}, ns, resources.ClaimName(p))
		Expect(pvc.Spec.VolumeName).To(Equal(pv.Name))
		Expect(getPipeline(ctx, p).Status.Storage.VolumeName).To(Equal(pv.Name))

		By("deleting the Pipeline removes its volume, as for NFS storage")
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", pv.Name) }).Should(BeTrue())
	})

	It("makes the volume from the class's CSI driver and attributes, writable when the class says so", func() {
		createClass(ctx, class, pipelinev1.ModelStorageClassSpec{
			CSI: &pipelinev1.CSIModelStorageSource{Driver: "nfs.csi.k8s.io",
				VolumeAttributes: map[string]string{"server": "nfs.models.example.com", "share": "/models"}},
			ReadOnly: ptr.To(false), NamespaceSelector: &metav1.LabelSelector{}})
		p := runningSample(ctx, ns, fromClass(class))

		pv := child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))
		Expect(pv.Spec.CSI).NotTo(BeNil())
		Expect(pv.Spec.CSI.Driver).To(Equal("nfs.csi.k8s.io"))
		Expect(pv.Spec.CSI.VolumeHandle).To(Equal(pv.Name))
		Expect(pv.Spec.CSI.ReadOnly).To(BeFalse())
		Expect(pv.Spec.CSI.VolumeAttributes).To(Equal(map[string]string{"server": "nfs.models.example.com", "share": "/models"}))
		Expect(pv.Spec.NFS).To(BeNil())
	})

	It("reports a missing class, makes no storage, and converges once the class is created", func() {
		p := createSample(ctx, ns, fromClass(class))
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseFailed))
		deg := condition(ctx, p, pipelinev1.ConditionDegraded)()
		Expect(deg.Status).To(Equal(metav1.ConditionTrue))
		Expect(deg.Reason).To(Equal(pipelinev1.ReasonModelStorageClassNotFound))
		Expect(deg.Message).To(And(ContainSubstring("ModelStorageClass "+class), ContainSubstring("namespace "+ns)))
		Consistently(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p)) }, "500ms").Should(BeTrue())
		Expect(gone(ctx, &corev1.PersistentVolumeClaim{}, ns, resources.ClaimName(p))).To(BeTrue())

		By("the class's creation starts a pass that makes the storage")
		createClass(ctx, class, pipelinev1.ModelStorageClassSpec{
			NFS: &pipelinev1.NFSModelStorageSource{Server: "10.0.0.9", Path: "/models"}, NamespaceSelector: selecting(ns)})
		pv := child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))
		Expect(pv.Spec.NFS.Server).To(Equal("10.0.0.9"))
		bindStorage(ctx, p)
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(condition(ctx, p, pipelinev1.ConditionDegraded)().Status).To(Equal(metav1.ConditionFalse))
	})

	It("keeps the storage of a namespace the class stops selecting for the grace, then withdraws it, and restores it when selected again", func() {
		createClass(ctx, class, pipelinev1.ModelStorageClassSpec{
			NFS: &pipelinev1.NFSModelStorageSource{Server: "10.0.0.9", Path: "/models"}, NamespaceSelector: selecting(ns)})
		p := runningSample(ctx, ns, fromClass(class), func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 3}
		})
		pv, claim := resources.PVName(p), resources.ClaimName(p)
		Expect(condition(ctx, p, pipelinev1.ConditionModelStorageAuthorized)()).To(HaveField("Status", metav1.ConditionTrue))

		By("the namespace is no longer selected: reported at once, the storage and the steps kept for the grace")
		labelNamespace(ctx, ns, publishedLabel, "")
		Eventually(func() string { return condition(ctx, p, pipelinev1.ConditionDegraded)().Reason }).
			Should(Equal(pipelinev1.ReasonModelStorageClassNotPermitted))
		deg := condition(ctx, p, pipelinev1.ConditionDegraded)()
		Expect(deg.Message).To(And(ContainSubstring("ModelStorageClass "+class), ContainSubstring("namespace "+ns),
			ContainSubstring("namespaceSelector"), ContainSubstring("it is withdrawn at")))
		auth := condition(ctx, p, pipelinev1.ConditionModelStorageAuthorized)()
		Expect(auth).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pipelinev1.ReasonModelStorageClassNotPermitted)))
		Expect(phase(ctx, p)()).To(Equal(pipelinev1.PipelinePhaseFailed))
		Consistently(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", pv) }, "500ms").Should(BeFalse())
		Expect(deploymentOf(ctx, p, 0).Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))

		By("the grace has passed: the steps are scaled to zero, the claim and the volume deleted")
		backdateRevocation(ctx, p, DefaultStorageRevocationGrace+time.Minute)
		for i := range p.Spec.Steps {
			Eventually(func() *int32 { return deploymentOf(ctx, p, i).Spec.Replicas }).Should(HaveValue(BeEquivalentTo(0)))
		}
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolumeClaim{}, ns, claim) }).Should(BeTrue())
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", pv) }).Should(BeTrue())
		// The steps' pods are gone: the protection controllers let the claim, then the volume, go.
		releaseProtection(ctx, &corev1.PersistentVolumeClaim{}, ns, claim)
		releaseProtection(ctx, &corev1.PersistentVolume{}, "", pv)
		Eventually(eventNotes(ctx, p)).Should(ContainElement(And(ContainSubstring("ModelStorageClass "+class),
			ContainSubstring("scaled to zero"), ContainSubstring("PersistentVolume "+pv))))
		Eventually(func() string { return condition(ctx, p, pipelinev1.ConditionModelStorageAuthorized)().Message }).
			Should(ContainSubstring("was withdrawn at"))
		Expect(condition(ctx, p, pipelinev1.ConditionAvailable)().Message).To(ContainSubstring("scaled to zero while its model storage is withdrawn"))
		Expect(phase(ctx, p)()).To(Equal(pipelinev1.PipelinePhaseFailed))
		Expect(stepStatus(ctx, p, 1)()).To(And(HaveField("State", pipelinev1.StepStateStopped), HaveField("Reason", "ModelStorageWithdrawn")))
		Consistently(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", pv) }, "500ms").Should(BeTrue())

		By("selected again: the storage is made anew and the steps scaled back, the autoscaled one handed to its autoscaler")
		labelNamespace(ctx, ns, publishedLabel, ns)
		Eventually(func() *metav1.Condition { return condition(ctx, p, pipelinev1.ConditionModelStorageAuthorized)() }).
			Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(func() *int32 { return deploymentOf(ctx, p, 0).Spec.Replicas }).Should(HaveValue(BeEquivalentTo(1)))
		Eventually(func() *int32 { return deploymentOf(ctx, p, 1).Spec.Replicas }).Should(HaveValue(BeEquivalentTo(1)))
		Expect(ownersOfReplicas(ctx, p, 1)).To(BeEmpty())
		bindStorage(ctx, p)
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning), func() string {
			return condition(ctx, p, pipelinev1.ConditionAvailable)().Message + " / " + condition(ctx, p, pipelinev1.ConditionDegraded)().Message
		})
	})

	It("withdraws the storage of a paused Pipeline whose class was deleted", func() {
		c := createClass(ctx, class, pipelinev1.ModelStorageClassSpec{
			NFS: &pipelinev1.NFSModelStorageSource{Server: "10.0.0.9", Path: "/models"}, NamespaceSelector: selecting(ns)})
		p := runningSample(ctx, ns, fromClass(class))
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Paused = ptr.To(true) })
		Eventually(func() string { return condition(ctx, p, pipelinev1.ConditionReconciled)().Reason }).Should(Equal(pipelinev1.ReasonPaused))

		By("the revocation's grace starts while the Pipeline is paused")
		Expect(k8sClient.Delete(ctx, c)).To(Succeed())
		Eventually(func() *metav1.Condition { return condition(ctx, p, pipelinev1.ConditionModelStorageAuthorized)() }).
			Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pipelinev1.ReasonModelStorageClassNotFound)))
		Expect(deploymentOf(ctx, p, 0).Spec.Replicas).To(HaveValue(BeEquivalentTo(1)))

		By("and pausing does not keep the storage past it")
		backdateRevocation(ctx, p, DefaultStorageRevocationGrace+time.Minute)
		for i := range p.Spec.Steps {
			Eventually(func() *int32 { return deploymentOf(ctx, p, i).Spec.Replicas }).Should(HaveValue(BeEquivalentTo(0)))
		}
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolumeClaim{}, ns, resources.ClaimName(p)) }).Should(BeTrue())
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p)) }).Should(BeTrue())
	})

	It("reports a class deleted under a Pipeline and keeps its volume", func() {
		c := createClass(ctx, class, pipelinev1.ModelStorageClassSpec{
			NFS: &pipelinev1.NFSModelStorageSource{Server: "10.0.0.9", Path: "/models"}, NamespaceSelector: selecting(ns)})
		p := runningSample(ctx, ns, fromClass(class))

		Expect(k8sClient.Delete(ctx, c)).To(Succeed())
		Eventually(func() string { return condition(ctx, p, pipelinev1.ConditionDegraded)().Reason }).
			Should(Equal(pipelinev1.ReasonModelStorageClassNotFound))
		Expect(gone(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))).To(BeFalse())
	})

	It("moves to new storage when the Pipeline names another class, and removes the old", func() {
		spec := pipelinev1.ModelStorageClassSpec{
			NFS: &pipelinev1.NFSModelStorageSource{Server: "10.0.0.9", Path: "/models"}, NamespaceSelector: selecting(ns)}
		createClass(ctx, class, spec)
		p := runningSample(ctx, ns, fromClass(class))
		oldPV, oldClaim := resources.PVName(p), resources.ClaimName(p)

		By("a class that does not exist yet: the old storage stays")
		updatePipeline(ctx, p, fromClass(class+"-v2"))
		p = getPipeline(ctx, p)
		Eventually(func() string { return condition(ctx, p, pipelinev1.ConditionDegraded)().Reason }).
			Should(Equal(pipelinev1.ReasonModelStorageClassNotFound))
		Expect(resources.PVName(p)).NotTo(Equal(oldPV))
		Consistently(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", oldPV) }, "500ms").Should(BeFalse())

		By("once it exists, the new storage is made and the old one goes")
		spec.NFS.Path = "/models-v2"
		createClass(ctx, class+"-v2", spec)
		bindStorage(ctx, p)
		rollOut(ctx, p)
		Eventually(func() any { return getPipeline(ctx, p).Status }).Should(HaveField("Phase", pipelinev1.PipelinePhaseRunning))
		Expect(child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p)).Spec.NFS.Path).To(Equal("/models-v2"))
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", oldPV) }).Should(BeTrue())
		Eventually(func() bool {
			return gone(ctx, &corev1.PersistentVolumeClaim{}, ns, oldClaim)
		}).Should(BeTrue())
	})
})

// backdateRevocation moves the start of the revocation of p's storage (the last transition of
// its ModelStorageAuthorized condition to False) back by d, as if the class had stopped granting
// the storage d earlier.
func backdateRevocation(ctx context.Context, p *pipelinev1.Pipeline, d time.Duration) {
	GinkgoHelper()
	Eventually(func() error {
		cur := getPipeline(ctx, p)
		c := meta.FindStatusCondition(cur.Status.Conditions, pipelinev1.ConditionModelStorageAuthorized)
		if c == nil || c.Status != metav1.ConditionFalse {
			return errors.New("the storage is not revoked")
		}
		c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.Add(-d))
		return k8sClient.Status().Update(ctx, cur)
	}).Should(Succeed())
}

// ownersOfReplicas are the field managers other than the operator's apply that own spec.replicas
// of step i's Deployment (the status subresource's replicas aside).
func ownersOfReplicas(ctx context.Context, p *pipelinev1.Pipeline, i int) []string {
	GinkgoHelper()
	d := &appsv1.Deployment{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: resources.StepObjectName(p, i)}, d)).To(Succeed())
	var owners []string
	for _, e := range d.ManagedFields {
		if e.Manager != apply.FieldManager && e.Subresource == "" && e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.GetRawBytes()), `"f:replicas"`) {
			owners = append(owners, e.Manager)
		}
	}
	return owners
}

// releaseProtection plays the protection controllers, which envtest does not run, once nothing
// uses the claim or volume ns/name that is being deleted: it removes their finalizers.
func releaseProtection(ctx context.Context, obj client.Object, ns, name string) {
	GinkgoHelper()
	Eventually(func() error {
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if obj.GetDeletionTimestamp().IsZero() {
			return errors.New("not being deleted")
		}
		obj.SetFinalizers(nil)
		return client.IgnoreNotFound(k8sClient.Update(ctx, obj))
	}).Should(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj))
	}).Should(BeTrue())
}
