package v1beta1

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// Both versions through the real apiserver: it stores v1beta1 and calls the conversion webhook
// the manager of this suite serves for every v1 request.
var _ = Describe("Pipeline conversion through the apiserver", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("reads the DESIGN.md Pipeline, applied as v1beta1, as v1, and an edit made in v1 loses nothing of it", func(ctx SpecContext) {
		warnings := deprecations.Load()
		Expect(k8sClient.Create(ctx, sample(ns))).To(Succeed())
		Expect(deprecations.Load()).To(BeNumerically(">", warnings), "v1beta1 is served with a deprecation warning")
		before := &pipelinev1beta1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "facedetection-pipeline"}, before)).To(Succeed())

		v1 := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(before), v1)).To(Succeed())
		Expect(v1.Spec.ModelStorage.Type).To(Equal(pipelinev1.ModelStorageTypeNFS))
		Expect(v1.Spec.ModelStorage.NFS).To(HaveValue(And(
			HaveField("Server", "192.168.20.235"), HaveField("Path", "/home/aiedge/csiTest"))))
		Expect(v1.Spec.Steps).To(HaveLen(2))
		Expect(v1.Spec.Steps[0]).To(And(HaveField("Name", "step-1"), HaveField("Location", "xx-test-node236"),
			HaveField("Model", "facedetection-1"), HaveField("Port", HaveValue(BeEquivalentTo(9080)))))
		Expect(v1.Spec.Steps[1]).To(And(HaveField("Name", "step-2"), HaveField("Model", "facedetection-2")))

		By("an edit through v1 keeps the v1beta1 object as it was, the edit aside")
		v1.Labels = map[string]string{"team": "vision"}
		Expect(k8sClient.Update(ctx, v1)).To(Succeed())
		after := &pipelinev1beta1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(before), after)).To(Succeed())
		Expect(after.Spec).To(Equal(before.Spec))
		Expect(after.Labels).To(HaveKeyWithValue("team", "vision"))
		Expect(after.Annotations).To(Equal(before.Annotations))
	})

	It("keeps what only v1 can say through a v1beta1 client's update", func(ctx SpecContext) {
		created := &pipelinev1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "v1-only"},
			Spec: pipelinev1.PipelineSpec{
				Paused: ptr.To(true),
				Steps: []pipelinev1.Step{
					{Name: "detect", Image: "nginx:latest", Model: "facedetection-1", Port: ptr.To[int32](9080)},
					{Name: "recognize", Image: "nginx:latest", Model: "facedetection-2"},
				},
				ModelStorage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass,
					StorageClass: &pipelinev1.StorageClassStorage{Name: "fast", Capacity: ptr.To(resource.MustParse("5Gi"))}},
				DataPath: &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain},
			},
		}
		Expect(k8sClient.Create(ctx, created)).To(Succeed())
		want := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(created), want)).To(Succeed())
		Expect(want.Spec.Paused).To(HaveValue(BeTrue()))

		By("v1beta1 reads spec.paused as its annotation")
		old := &pipelinev1beta1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(created), old)).To(Succeed())
		Expect(old.Annotations).To(HaveKeyWithValue(pipelinev1beta1.PausedAnnotation, "true"))
		Expect(old.Spec.Steps[0].Name).To(Equal("detect"))

		By("a v1beta1 client that edits only a label leaves the v1 spec as it was")
		old.Labels = map[string]string{"team": "vision"}
		Expect(k8sClient.Update(ctx, old)).To(Succeed())
		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(created), got)).To(Succeed())
		Expect(got.Spec).To(Equal(want.Spec))
		Expect(got.Labels).To(HaveKeyWithValue("team", "vision"))
		Expect(got.Annotations).NotTo(HaveKey(pipelinev1.PausedAnnotation), "paused is a spec field in v1, not an annotation")

		By("unpausing through the v1beta1 annotation unpauses in v1")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(created), old)).To(Succeed())
		delete(old.Annotations, pipelinev1beta1.PausedAnnotation)
		Expect(k8sClient.Update(ctx, old)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(created), got)).To(Succeed())
		Expect(got.Spec.Paused).To(Or(BeNil(), HaveValue(BeFalse())))
	})

	It("refuses a tenant's v1 Pipeline whose NFS storage they could not create themselves, as in v1beta1", func(ctx SpecContext) {
		tenant := ns + "-tenant"
		grant(ctx, ns, tenant, editPipelines)
		p := &pipelinev1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "borrowed-export"},
			Spec: pipelinev1.PipelineSpec{
				Steps: []pipelinev1.Step{{Name: "detect", Image: "nginx:latest", Model: "facedetection-1"}},
				ModelStorage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS,
					NFS: &pipelinev1.NFSStorage{Server: "192.168.20.235", Path: "/home/other-team"}},
			},
		}
		err := as(tenant).Create(ctx, p)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(
			ContainSubstring("nfs storage (NFS server 192.168.20.235, share /home/other-team)"),
			ContainSubstring(tenant+" may not create PersistentVolumes")))
	})
})
