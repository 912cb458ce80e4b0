package admission

import (
	"fmt"

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

// sampleV1beta1 is the seed Pipeline, the v1beta1 resource users hold, as config/samples ships it.
func sampleV1beta1(ns string) *pipelinev1beta1.Pipeline {
	p, err := samples.PipelineV1beta1(ns)
	Expect(err).NotTo(HaveOccurred())
	return p
}

// Both versions through the real apiserver: it stores v1 and calls the conversion webhook the
// manager of this suite serves for every v1beta1 request.
var _ = Describe("Pipeline conversion through the apiserver", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("reads the seed Pipeline, applied as v1beta1, as v1, and an edit made in v1 loses nothing of it", func(ctx SpecContext) {
		warnings := deprecations.Load()
		Expect(k8sClient.Create(ctx, sampleV1beta1(ns))).To(Succeed())
		Expect(deprecations.Load()).To(BeNumerically(">", warnings), "v1beta1 is served with a deprecation warning")
		before := &pipelinev1beta1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "facedetection-pipeline"}, before)).To(Succeed())
		Expect(before.Spec.Steps[0].Args).To(HaveKeyWithValue("listenPort", pipelinev1beta1.ArgValue("9080")), "args are kept")

		v1 := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(before), v1)).To(Succeed())
		Expect(v1.Spec.ModelStorage.Type).To(Equal(pipelinev1.ModelStorageTypeNFS))
		Expect(v1.Spec.ModelStorage.NFS).To(HaveValue(And(
			HaveField("Server", "192.168.20.235"), HaveField("Path", "/home/aiedge/csiTest"),
			HaveField("Capacity", HaveValue(Equal(resource.MustParse("1Gi")))),
			HaveField("AccessModes", Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany})))))
		Expect(v1.Spec.ModelStorage.MountPath).To(Equal("/models"))
		Expect(v1.Spec.Steps).To(HaveLen(2))
		Expect(v1.Spec.Steps[0]).To(And(HaveField("Name", "step-1"), HaveField("Location", "xx-test-node236"),
			HaveField("Model", "facedetection-1"), HaveField("Port", HaveValue(BeEquivalentTo(9080))),
			HaveField("Replicas", HaveValue(BeEquivalentTo(1)))))
		Expect(v1.Spec.Steps[1]).To(And(HaveField("Name", "step-2"), HaveField("Model", "facedetection-2"),
			HaveField("Port", HaveValue(BeEquivalentTo(80))), HaveField("Replicas", HaveValue(BeEquivalentTo(1)))))
		Expect(v1.LeadingEnv(0)).To(Equal([]string{pipelinev1.ListenPortEnv}), "the arg is an env entry that leads")

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

	It("keeps a step's inputs through a v1beta1 client's update, and refuses in v1beta1's words to turn the router off under them", func(ctx SpecContext) {
		created := &pipelinev1.Pipeline{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tensors"},
			Spec: pipelinev1.PipelineSpec{
				Steps: []pipelinev1.Step{
					{Name: "encode", Image: "nvcr.io/nvidia/tritonserver:25.01-py3", Model: "triton/encoder", Protocol: pipelinev1.StepProtocolOpenInference},
					{Name: "classify", Image: "nvcr.io/nvidia/tritonserver:25.01-py3", Model: "triton/classifier", Protocol: pipelinev1.StepProtocolOpenInference,
						Inputs: []pipelinev1.StepTensorInput{{Name: "embeddings", Step: "encode", Tensor: "last_hidden_state"}, {Name: "attention_mask", Tensor: "attention_mask"}}},
				},
				ModelStorage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass,
					StorageClass: &pipelinev1.StorageClassStorage{Name: "fast", Capacity: ptr.To(resource.MustParse("5Gi"))}},
				DataPath: &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter},
			},
		}
		Expect(k8sClient.Create(ctx, created)).To(Succeed())
		want := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(created), want)).To(Succeed())
		Expect(want.Spec.Steps[1].Inputs).To(Equal(created.Spec.Steps[1].Inputs))

		By("a v1beta1 client that edits only a label leaves the inputs as they were")
		old := &pipelinev1beta1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(created), old)).To(Succeed())
		Expect(old.Annotations).To(HaveKeyWithValue(pipelinev1beta1.ConversionDataAnnotation, ContainSubstring(`"inputs"`)))
		old.Labels = map[string]string{"team": "nlp"}
		Expect(k8sClient.Update(ctx, old)).To(Succeed())
		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(created), got)).To(Succeed())
		Expect(got.Spec).To(Equal(want.Spec))

		By("turning the router off in v1beta1 is refused: the inputs need it")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(created), old)).To(Succeed())
		old.Spec.Router.Enabled = false
		err := k8sClient.Update(ctx, old)
		expectInvalid(err, "spec.steps[1].inputs", "keep router.enabled true, or remove inputs in v1")
		Expect(err.Error()).NotTo(ContainSubstring("dataPath"))
	})

	It("lets a v1beta1 client pause and ask for a failback with its annotations, which are v1's spec fields", func(ctx SpecContext) {
		p := sampleV1beta1(ns)
		p.Spec.Failover = &pipelinev1beta1.Failover{Failback: pipelinev1beta1.FailbackManual}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		p.Annotations = map[string]string{pipelinev1beta1.PausedAnnotation: "true", pipelinev1beta1.FailbackAnnotation: "true"}
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		Expect(got.Spec.Paused).To(HaveValue(BeTrue()))
		Expect(got.Spec.Failover.FailbackNow).To(HaveValue(BeTrue()))
	})

	It("refuses a tenant's v1beta1 Pipeline whose nfs storage they could not create themselves, in v1beta1's words", func(ctx SpecContext) {
		tenant := ns + "-tenant"
		grant(ctx, ns, tenant, editPipelines)
		p := sampleV1beta1(ns)
		p.Spec.ModelStorage.CSIParameter["share"] = "/home/other-team"
		err := as(tenant).Create(ctx, p)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(
			ContainSubstring("spec.modelStorage.type"),
			ContainSubstring("nfs storage (NFS server 192.168.20.235, share /home/other-team)"),
			ContainSubstring(tenant+" may not create PersistentVolumes"),
			ContainSubstring("use modelStorage.type storageClass"),
			ContainSubstring("existingClaim (a claim in namespace "+ns+")")))
	})
})

// The bad-input catalogue in v1beta1: what v1beta1's own schema and CEL rules refuse, and what
// the admission webhooks refuse after the apiserver converts the request to v1 for them
// (matchPolicy Equivalent), with the field paths and words of v1beta1.
var _ = Describe("v1beta1 Pipeline admission", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		warned.take()
	})

	It("accepts the seed Pipeline, which reads back as the v1 sample with its arg as env", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, sampleV1beta1(ns))).To(Succeed())
		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "facedetection-pipeline"}, got)).To(Succeed())
		want := sample(ns)
		want.Default()
		Expect(got.Spec.Steps[0].Env).To(Equal([]corev1.EnvVar{{Name: pipelinev1.ListenPortEnv, Value: "9080"}}))
		got.Spec.Steps[0].Env = nil
		Expect(got.Spec).To(Equal(want.Spec))
	})

	It("names unnamed steps step-<position>, and accepts a step-<n> name at its own position", func(ctx SpecContext) {
		p := sampleV1beta1(ns)
		p.Spec.Steps[1].Name = "step-2"
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		Expect(got.Spec.Steps[0].Name).To(Equal("step-1"))
		Expect(got.Spec.Steps[1].Name).To(Equal("step-2"))
	})

	It("lets args.listenPort alone change the port it set", func(ctx SpecContext) {
		p := sampleV1beta1(ns)
		p.Spec.Steps[1].Port = ptr.To[int32](8080)
		p.Spec.Steps[1].Args = map[string]pipelinev1beta1.ArgValue{"listenPort": "8080"}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		p.Spec.Steps[0].Args["listenPort"] = "9090"
		p.Spec.Steps[1].Args["listenPort"] = "8081"
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		Expect(got.Spec.Steps[0].Port).To(HaveValue(BeEquivalentTo(9090)), "the port follows the argument")
		Expect(got.Spec.Steps[1].Port).To(HaveValue(BeEquivalentTo(8081)), "a port equal to the argument follows it too")

		By("a port changed together with a different argument is still refused")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		p.Spec.Steps[1].Args["listenPort"] = "9191"
		p.Spec.Steps[1].Port = ptr.To[int32](7070)
		Expect(k8sClient.Update(ctx, p)).To(MatchError(ContainSubstring("port and args.listenPort disagree")))
	})

	It("refuses a change of storageClass storage and says how to move, in v1beta1's words", func(ctx SpecContext) {
		p := sampleV1beta1(ns)
		p.Spec.ModelStorage = pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeStorageClass, StorageClassName: "fast"}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		p.Spec.ModelStorage.Capacity = ptr.To(resource.MustParse("10Gi"))
		err := k8sClient.Update(ctx, p)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		Expect(err.Error()).To(And(ContainSubstring("spec.modelStorage"),
			ContainSubstring("modelStorage of type storageClass cannot change"),
			ContainSubstring("point a Pipeline at it with modelStorage.type existingClaim")))
	})

	It("warns in v1beta1's words", func(ctx SpecContext) {
		p := sampleV1beta1(ns)
		p.Spec.Steps[1].Env = []corev1.EnvVar{{Name: "MODEL_PATH", Value: "/elsewhere"}}
		p.Spec.ModelStorage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(warned.take()).To(ContainElements(
			"step step-2: env MODEL_PATH replaces the value the operator sets",
			"modelStorage.accessModes ReadWriteOnce: steps on 2 different nodes cannot all mount the volume",
		))
	})

	DescribeTable("refuses a bad v1beta1 Pipeline with a message that names the v1beta1 field",
		func(ctx SpecContext, mutate func(p *pipelinev1beta1.Pipeline), field, message string) {
			p := sampleV1beta1(ns)
			mutate(p)
			expectInvalid(k8sClient.Create(ctx, p), field, message)
		},
		// Refused by v1beta1's schema and CEL rules.
		// No steps: v1 holds no empty list, so after the defaulting webhook's round trip through
		// v1 the steps come back null, which the schema refuses as not a list.
		Entry("no steps", func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps = []pipelinev1beta1.Step{} },
			"spec.steps", "must be of type array"),
		Entry("an arg the operator sets", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Steps[1].Args = map[string]pipelinev1beta1.ArgValue{"MODEL_PATH": "/x"}
		}, "spec.steps[1].args", "args must not set MODEL_NAME, MODEL_PATH"),
		Entry("an arg that is no environment variable name", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Steps[1].Args = map[string]pipelinev1beta1.ArgValue{"batch size": "8"}
		}, "spec.steps[1].args", "args keys must be printable ASCII characters without spaces or '='"),
		Entry("a listenPort out of range", func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[0].Args["listenPort"] = "99999" },
			"spec.steps[0].args", "args.listenPort must be a port number from 1 to 65535"),
		Entry("port and listenPort that disagree", func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[0].Port = ptr.To[int32](8080) },
			"spec.steps[0]", "port and args.listenPort disagree"),
		Entry("two steps with one name", func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[0].Name, p.Spec.Steps[1].Name = "detect", "detect" },
			"spec.steps", "step names must be unique"),
		Entry("a name taken from an unnamed step", func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[0].Name = "step-2" },
			"spec.steps", "a step named step-<n> takes the name of the unnamed step at position n"),
		Entry("a step named router with the router enabled", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Steps[1].Name = "router"
			p.Spec.Router = &pipelinev1beta1.Router{Enabled: true}
		}, "spec", "a step named router would share the name <pipeline>-router"),
		Entry("nfs without a server", func(p *pipelinev1beta1.Pipeline) { delete(p.Spec.ModelStorage.CSIParameter, "server") },
			"spec.modelStorage", "modelStorage of type nfs needs csiParameter.server and csiParameter.share"),
		Entry("a relative nfs share", func(p *pipelinev1beta1.Pipeline) { p.Spec.ModelStorage.CSIParameter["share"] = "home/models" },
			"spec.modelStorage", "csiParameter.share must be an absolute path on the NFS server"),
		Entry("csi without volume attributes", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeCSI, CSIParameter: map[string]string{"driver": "nfs.csi.k8s.io"}}
		}, "spec.modelStorage", "modelStorage of type csi needs the driver's volume attributes"),
		Entry("storageClass without a class", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeStorageClass}
		}, "spec.modelStorage", "modelStorage of type storageClass needs storageClassName"),
		Entry("existingClaim without a claim", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeExistingClaim}
		}, "spec.modelStorage", "modelStorage of type existingClaim needs claimName"),
		Entry("modelStorageClass without a class", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeModelStorageClass}
		}, "spec.modelStorage", "modelStorage of type modelStorageClass needs modelStorageClassName"),
		// The next two say what v1 cannot hold: the conversion keeps it in the conversion data,
		// which survives the defaulting webhook's round trip through v1 only while the webhook
		// changes nothing of the storage (capacity and access modes written out).
		Entry("modelStorageClass with csiParameter", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage.Type, p.Spec.ModelStorage.ModelStorageClassName = pipelinev1beta1.StorageTypeModelStorageClass, "shared-models"
			p.Spec.ModelStorage.Capacity = ptr.To(resource.MustParse("1Gi"))
			p.Spec.ModelStorage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}
		}, "spec.modelStorage", "modelStorage of type modelStorageClass takes its source from the ModelStorageClass: remove csiParameter"),
		Entry("modelStorageClassName with another type", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeStorageClass, StorageClassName: "fast",
				ModelStorageClassName: "shared-models", Capacity: ptr.To(resource.MustParse("1Gi")),
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}}
		}, "spec.modelStorage", "modelStorageClassName is only read by modelStorage.type modelStorageClass"),
		// Refused by the validating webhook, after conversion to v1: it names the v1beta1 field.
		Entry("an image with a trailing space", func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[0].Image = "nginx:latest " },
			"spec.steps[0].image", "not a valid image reference"),
		Entry("a stopWhen that does not compile", func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[0].StopWhen = "response.faces ==" },
			"spec.steps[0].stopWhen", "not a valid CEL condition"),
		Entry("an env name with '='", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Steps[1].Env = []corev1.EnvVar{{Name: "A=B", Value: "1"}}
		}, "spec.steps[1].env[A=B].name", "environment variable names must be non-empty and contain no '='"),
		Entry("a router location with an empty DNS label", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Router = &pipelinev1beta1.Router{Enabled: true, Location: "edge..node"}
		}, "spec.router.location", "not a valid node name"),
		Entry("a router fallback location with an empty DNS label", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Router = &pipelinev1beta1.Router{Enabled: true, Location: "edge-a", FallbackLocations: []string{"edge..node"}}
		}, "spec.router.fallbackLocations[0]", "not a valid node name"),
		Entry("router requests above limits", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Router = &pipelinev1beta1.Router{Enabled: true, Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			}}
		}, "spec.router.resources.requests[memory]", "must not exceed the limit 1Gi"),
		Entry("a header the router sets itself", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.Router = &pipelinev1beta1.Router{Enabled: true, PropagateHeaders: []pipelinev1beta1.HeaderName{"X-Request-Id"}}
		}, "spec.router.propagateHeaders[0]", "set by the router itself"),
		Entry("an nfs server that is no host", func(p *pipelinev1beta1.Pipeline) { p.Spec.ModelStorage.CSIParameter["server"] = "nfs server!" },
			"spec.modelStorage.csiParameter[server]", "must be an IP address or a DNS name of the NFS server"),
		Entry("an nfs share with '..'", func(p *pipelinev1beta1.Pipeline) { p.Spec.ModelStorage.CSIParameter["share"] = "/home/../models" },
			"spec.modelStorage.csiParameter[share]", "must be a clean absolute path (/models)"),
		Entry("a csi driver that is no driver name", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage.Type = pipelinev1beta1.StorageTypeCSI
			p.Spec.ModelStorage.CSIParameter["driver"] = "NFS_Driver"
		}, "spec.modelStorage.csiParameter[driver]", "must be a CSI driver name"),
		Entry("a class name that is no object name", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeStorageClass, StorageClassName: "Fast_SSD"}
		}, "spec.modelStorage.storageClassName", "not a valid StorageClass name"),
		Entry("a claim name that is no object name", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeExistingClaim, ClaimName: "Team_Models"}
		}, "spec.modelStorage.claimName", "not a valid claim name"),
		Entry("a ModelStorageClass that does not exist", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeModelStorageClass, ModelStorageClassName: "nowhere"}
		}, "spec.modelStorage.modelStorageClassName", "ModelStorageClass nowhere does not exist"),
		Entry("a zero capacity", func(p *pipelinev1beta1.Pipeline) { p.Spec.ModelStorage.Capacity = ptr.To(resource.MustParse("0")) },
			"spec.modelStorage.capacity", "must be greater than zero"),
		Entry("an access mode twice", func(p *pipelinev1beta1.Pipeline) {
			p.Spec.ModelStorage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadOnlyMany}
		}, "spec.modelStorage.accessModes[1]", "Duplicate value"),
		Entry("the root as mount path", func(p *pipelinev1beta1.Pipeline) { p.Spec.ModelStorage.MountPath = "/" },
			"spec.modelStorage.mountPath", "must not be the root directory"),
	)

	It("names no v1 field in a v1beta1 refusal", func(ctx SpecContext) {
		p := sampleV1beta1(ns)
		p.Spec.ModelStorage.CSIParameter["server"] = "nfs server!"
		p.Spec.Router = &pipelinev1beta1.Router{Enabled: true, Location: "edge..node"}
		err := k8sClient.Create(ctx, p)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		for _, v1Field := range []string{"nfs.server", "dataPath"} {
			Expect(err.Error()).NotTo(ContainSubstring(v1Field), fmt.Sprintf("%v names the v1 field %s", err, v1Field))
		}
	})
})
