package admission

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
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

// The bad-input catalogue in v1: what v1's own schema and CEL rules refuse, with messages and
// field paths in v1 terms, and what the admission webhooks refuse after the apiserver converts
// the request to v1beta1 for them (matchPolicy Equivalent).
var _ = Describe("v1 Pipeline admission", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	sampleV1 := func(ns string) *pipelinev1.Pipeline {
		p, err := samples.PipelineV1(ns)
		Expect(err).NotTo(HaveOccurred())
		return p
	}

	It("accepts the v1 sample, which reads back as the design's Pipeline in v1beta1", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, sampleV1(ns))).To(Succeed())
		old := &pipelinev1beta1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "facedetection-pipeline"}, old)).To(Succeed())
		Expect(old.Spec.ModelStorage.Type).To(Equal(pipelinev1beta1.StorageTypeNFS))
		Expect(old.Spec.ModelStorage.CSIParameter).To(Equal(map[string]string{"server": "192.168.20.235", "share": "/home/aiedge/csiTest"}))
		Expect(old.Spec.Steps[0].Port).To(HaveValue(BeEquivalentTo(9080)))
	})

	DescribeTable("refuses a bad v1 Pipeline with a message that says what to fix",
		func(ctx SpecContext, mutate func(p *pipelinev1.Pipeline), field, message string) {
			p := sampleV1(ns)
			mutate(p)
			expectInvalid(k8sClient.Create(ctx, p), field, message)
		},
		Entry("no steps", func(p *pipelinev1.Pipeline) { p.Spec.Steps = []pipelinev1.Step{} },
			"spec.steps", "Required value"),
		Entry("two steps with one name", func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Name = p.Spec.Steps[0].Name },
			"spec.steps[1]", "Duplicate value"),
		Entry("a step named router with the router on", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Name = "router"
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter}
		}, "spec", "a step named router would share the name <pipeline>-router"),
		Entry("router settings without the router", func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain, Router: &pipelinev1.Router{Replicas: ptr.To[int32](3)}}
		}, "spec.dataPath", "dataPath.router configures the router, which runs only with dataPath.mode Router"),
		Entry("fallbackLocations without location", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].Location, p.Spec.Steps[0].FallbackLocations = "", []string{"edge-b"}
		}, "spec.steps[0]", "fallbackLocations needs location"),
		Entry("fallbackLocations repeating location", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].FallbackLocations = []string{p.Spec.Steps[0].Location}
		}, "spec.steps[0]", "fallbackLocations must not repeat location"),
		Entry("a fallback node twice", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].FallbackLocations = []string{"edge-b", "edge-b"} },
			"spec.steps[0].fallbackLocations", "fallbackLocations must not name a node twice"),
		Entry("router fallbackLocations without location", func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter,
				Router: &pipelinev1.Router{FallbackLocations: []string{"edge-b"}}}
		}, "spec.dataPath.router", "router.fallbackLocations needs router.location"),
		Entry("router fallbackLocations repeating location", func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter,
				Router: &pipelinev1.Router{Location: "edge-a", FallbackLocations: []string{"edge-a"}}}
		}, "spec.dataPath.router", "router.fallbackLocations must not repeat router.location"),
		Entry("a router fallback node twice", func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter,
				Router: &pipelinev1.Router{Location: "edge-a", FallbackLocations: []string{"edge-b", "edge-b"}}}
		}, "spec.dataPath.router.fallbackLocations", "router.fallbackLocations must not name a node twice"),
		Entry("replicas and autoscaling", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Replicas = ptr.To[int32](2)
			p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 4}
		}, "spec.steps[1]", "set replicas or autoscaling, not both"),
		Entry("autoscaling with minReplicas above maxReplicas", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MinReplicas: ptr.To[int32](3), MaxReplicas: 2}
		}, "spec.steps[1].autoscaling", "autoscaling.minReplicas must not exceed autoscaling.maxReplicas"),
		Entry("a model outside the storage", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Model = "../secrets" },
			"spec.steps[0].model", "must not contain '.' or '..' path segments"),
		Entry("a port out of range", func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Port = ptr.To[int32](70000) },
			"spec.steps[1].port", "should be less than or equal to 65535"),
		Entry("a storage type in v1beta1's spelling", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.Type = "nfs" },
			"spec.modelStorage.type", "Unsupported value"),
		Entry("type NFS without its member", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS = nil },
			"spec.modelStorage.nfs.server", "Required value"),
		Entry("a second member", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage.CSI = &pipelinev1.CSIStorage{Driver: "nfs.csi.k8s.io", VolumeAttributes: map[string]string{"server": "a"}}
		}, "spec.modelStorage", "modelStorage.csi is set with modelStorage.type CSI, and only then"),
		Entry("a relative NFS path", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS.Path = "home/models" },
			"spec.modelStorage.nfs.path", "nfs.path must be an absolute path on the NFS server"),
		Entry("a CSI driver that is no driver name", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
				CSI: &pipelinev1.CSIStorage{Driver: "NFS_Driver", VolumeAttributes: map[string]string{"server": "a", "share": "/b"}}}
		}, "spec.modelStorage.csi.driver", "csi.driver must be a CSI driver name"),
		Entry("type ExistingClaim without its member", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim}
		}, "spec.modelStorage", "modelStorage.existingClaim is set with modelStorage.type ExistingClaim, and only then"),
		Entry("a StorageClass member with type NFS", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage.StorageClass = &pipelinev1.StorageClassStorage{Name: "fast"}
		}, "spec.modelStorage", "modelStorage.storageClass is set with modelStorage.type StorageClass, and only then"),
		Entry("type ModelStorageClass without its member", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass}
		}, "spec.modelStorage.modelStorageClass.name", "Required value"),
		Entry("a CSI volume attribute too long", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
				CSI: &pipelinev1.CSIStorage{Driver: "nfs.csi.k8s.io", VolumeAttributes: map[string]string{"server": strings.Repeat("a", 4097)}}}
		}, "spec.modelStorage.csi.volumeAttributes", "csi.volumeAttributes keys must be at most 253 characters and values at most 4096"),
		Entry("an ingress TLS Secret without a host", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{TLSSecretName: "cert"}}
		}, "spec.expose.ingress", "ingress.tlsSecretName needs ingress.host"),
		Entry("an ingress host that is no DNS name", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "Infer_Host"}}
		}, "spec.expose.ingress.host", "ingress.host must be a DNS name (a DNS-1123 subdomain"),
		Entry("an ingress path without a leading '/'", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Path: "infer"}}
		}, "spec.expose.ingress.path", "ingress.path must start with '/'"),
		Entry("an ingress path with '..'", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Path: "/a/../b"}}
		}, "spec.expose.ingress.path", "ingress.path must not contain '//', '.' or '..' segments"),
		Entry("an ingress path with a '?'", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Path: "/infer?x=1"}}
		}, "spec.expose.ingress.path", "ingress.path must not contain spaces, '?' or '#'"),
		Entry("an ingress host that is an address", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "10.1.2.3"}}
		}, "spec.expose.ingress.host", "ingress.host must be a DNS name, not an IP address"),
		Entry("an invalid Pipeline name", func(p *pipelinev1.Pipeline) { p.Name = "face.detection" },
			"metadata.name", "at most 63 characters of lowercase letters, digits and '-'"),
		// Refused by the admission webhook, after conversion to v1beta1: it names the v1 field.
		Entry("an NFS server that is no host", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS.Server = "nfs server!" },
			"spec.modelStorage.nfs.server", "must be an IP address or a DNS name of the NFS server"),
		Entry("a StorageClass name that is no object name", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass,
				StorageClass: &pipelinev1.StorageClassStorage{Name: "Fast_SSD"}}
		}, "spec.modelStorage.storageClass.name", "not a valid StorageClass name"),
		Entry("a ModelStorageClass that does not exist", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
				ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: "nowhere"}}
		}, "spec.modelStorage.modelStorageClass.name", "ModelStorageClass nowhere does not exist"),
		Entry("an image with a trailing space", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Image = "nginx:latest " },
			"spec.steps[0].image", "not a valid image reference"),
		Entry("a stopWhen that does not compile", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].StopWhen = "response.faces ==" },
			"spec.steps[0].stopWhen", "not a valid CEL condition"),
		Entry("an env name with '='", func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Env = []corev1.EnvVar{{Name: "A=B", Value: "1"}} },
			"spec.steps[1].env[A=B].name", "environment variable names must be non-empty and contain no '='"),
	)

	It("names a step written without a name as v1beta1 does, step-<position>: the defaulting webhook sees it in v1beta1", func(ctx SpecContext) {
		p := sampleV1(ns)
		p.Spec.Steps[1].Name = ""
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(p.Spec.Steps[1].Name).To(Equal("step-2"))
	})

	It("refuses a change of StorageClass storage in v1 too, and says how to move", func(ctx SpecContext) {
		p := sampleV1(ns)
		p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass,
			StorageClass: &pipelinev1.StorageClassStorage{Name: "fast"}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		p.Spec.ModelStorage.StorageClass.Capacity = ptr.To(resource.MustParse("10Gi"))
		err := k8sClient.Update(ctx, p)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		Expect(err.Error()).To(And(ContainSubstring("spec.modelStorage"),
			ContainSubstring("modelStorage of type StorageClass cannot change its type or storageClass")))
	})
})
