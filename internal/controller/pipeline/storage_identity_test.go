package pipeline

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/storageversion"
)

// The names the previous release gave the volume and claim of keptStoragePipeline, in namespace
// storage-upgrade: it hashed the storage as v1beta1 said it (csi storage naming no driver).
// The recipe, reading v1 (driver nfs.csi.k8s.io), names them otherwise: models-kept-models-afee2183.
const (
	previousClaim  = "models-kept-models-02b89a87"
	previousVolume = "storage-upgrade-models-kept-e268281bde58c5036e8cf00d4390f445a2fa52edff8df7b47fefa4d77db3d771"
)

// keptStoragePipeline is a Pipeline as the previous release left it in ns: made in v1beta1 with
// csi storage that names no driver, stored as v1 with the conversion data that keeps the
// v1beta1 storage, without a recorded storage identity (the previous release had none).
func keptStoragePipeline(ns, name string) *pipelinev1.Pipeline {
	return &pipelinev1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{Finalizer},
			Annotations: map[string]string{pipelinev1.ConversionDataAnnotation: `{"modelStorage":{"type":"csi","csiParameter":` +
				`{"server":"10.0.0.9","share":"/models"},"capacity":"1Gi","accessModes":["ReadOnlyMany"],"mountPath":"/models"},` +
				`"steps":{"0":{"unnamed":true}}}`}},
		Spec: pipelinev1.PipelineSpec{
			Steps: []pipelinev1.Step{{Name: "step-1", Image: "nginx:latest", Model: "m1", Location: sampleNodes[0]}},
			ModelStorage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI, MountPath: "/models",
				CSI: &pipelinev1.CSIStorage{Driver: pipelinev1.DefaultCSIDriver,
					VolumeAttributes: map[string]string{"server": "10.0.0.9", "share": "/models"},
					Capacity:         ptr.To(resource.MustParse("1Gi")), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}}},
		},
	}
}

var _ = Describe("Storage identity", func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	It("keeps the volume and claim of a Pipeline stored by the previous release once the migration records its identity", func() {
		const ns = "storage-upgrade"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		p := keptStoragePipeline(ns, "models-kept")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())

		By("waiting, without a child, while the identity is not recorded")
		Eventually(func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionProgressing)()).Reason }).
			Should(Equal(pipelinev1.ReasonStorageIdentityPending))
		Consistently(func(g Gomega) {
			claims := &corev1.PersistentVolumeClaimList{}
			g.Expect(k8sClient.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
			g.Expect(claims.Items).To(BeEmpty())
			deployments := &appsv1.DeploymentList{}
			g.Expect(k8sClient.List(ctx, deployments, client.InNamespace(ns))).To(Succeed())
			g.Expect(deployments.Items).To(BeEmpty())
		}, "1s").Should(Succeed())

		By("the volume and claim the previous release made, bound")
		stored := getPipeline(ctx, p)
		previous := stored.DeepCopy()
		Expect(pipelinev1beta1.RecordStorageIdentity(previous)).To(BeTrue())
		Expect(resources.ClaimName(previous)).To(Equal(previousClaim))
		Expect(resources.PVName(previous)).To(Equal(previousVolume))
		Expect(resources.ClaimName(stored)).NotTo(Equal(previousClaim), "the recipe alone names another claim")
		for _, obj := range []runtime.ApplyConfiguration{resources.PV(previous, "", resources.InlineVolumeSource(previous)), resources.PVC(previous, "")} {
			stamped, err := apply.Stamped(obj)
			Expect(err).NotTo(HaveOccurred())
			Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(stamped), client.FieldOwner(apply.FieldManager))).To(Succeed())
		}
		bindStorage(ctx, previous)
		claim := child(ctx, &corev1.PersistentVolumeClaim{}, ns, previousClaim)
		volume := child(ctx, &corev1.PersistentVolume{}, "", previousVolume)

		By("the storage version migration of the upgraded operator")
		m := &storageversion.Migration{Client: k8sClient, RecordStorageIdentity: pipelinev1beta1.RecordStorageIdentity}
		patched, migrated, err := m.Run(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(migrated).To(BeFalse(), "the CRD stores v1 alone already")
		Expect(patched).To(BeNumerically(">=", 1))
		recorded := getPipeline(ctx, p)
		Expect(recorded.Annotations).To(HaveKey(pipelinev1.StorageIdentityAnnotation))
		Expect(recorded.StorageIdentity()).To(Equal([]string{"csi", "", "1Gi", "ReadOnlyMany", "server=10.0.0.9", "share=/models"}))

		By("the steps mounting the claim the previous release made, and no other volume or claim")
		Eventually(func() string { return mountedClaim(deploymentOf(ctx, p, 0)) }).Should(Equal(previousClaim))
		rollOut(ctx, recorded)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Consistently(func(g Gomega) {
			expectIntact(ctx, g, claim)
			claims := &corev1.PersistentVolumeClaimList{}
			g.Expect(k8sClient.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
			g.Expect(claims.Items).To(HaveLen(1))
			volumes := &corev1.PersistentVolumeList{}
			g.Expect(k8sClient.List(ctx, volumes, volumeSelector(p))).To(Succeed())
			g.Expect(volumes.Items).To(HaveLen(1))
			g.Expect(volumes.Items[0].UID).To(Equal(volume.UID))
			g.Expect(getPipeline(ctx, p).Status.Storage.ClaimName).To(Equal(previousClaim))
		}, "2s").Should(Succeed())

		By("a second run finding nothing to record")
		again, _, err := m.Run(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(BeZero())
	})

	It("records the identity itself when it is given the conversion's recording", func() {
		ns := newNamespace(ctx)
		p := keptStoragePipeline(ns, "models-kept")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		r := &Reconciler{Client: k8sClient, APIReader: k8sClient, Recorder: events.NewFakeRecorder(10),
			RecordStorageIdentity: pipelinev1beta1.RecordStorageIdentity}
		Eventually(func() (map[string]string, error) {
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
			return getPipeline(ctx, p).Annotations, err
		}).Should(HaveKey(pipelinev1.StorageIdentityAnnotation))
		Expect(getPipeline(ctx, p).StorageIdentityPending()).To(BeFalse())
		want := p.DeepCopy()
		Expect(pipelinev1beta1.RecordStorageIdentity(want)).To(BeTrue())
		Eventually(func() string { return mountedClaim(deploymentOf(ctx, p, 0)) }).Should(Equal(resources.ClaimName(want)))
	})
})
