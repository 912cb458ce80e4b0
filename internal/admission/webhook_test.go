package admission

import (
	"context"
	"fmt"
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
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed()) })
	return ns.Name
}

// sample is the sample Pipeline written in v1, as config/samples ships it.
func sample(ns string) *pipelinev1.Pipeline {
	p, err := samples.PipelineV1(ns)
	Expect(err).NotTo(HaveOccurred())
	return p
}

// nfs is NFS storage of the export path on server.
func nfs(server, path string) pipelinev1.ModelStorage {
	return pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS, NFS: &pipelinev1.NFSStorage{Server: server, Path: path}}
}

// existingClaim is storage of the user's claim name.
func existingClaim(name string) pipelinev1.ModelStorage {
	return pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim, ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: name}}
}

// storageClass is storage of a claim the StorageClass name provisions.
func storageClass(name string) pipelinev1.ModelStorage {
	return pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass, StorageClass: &pipelinev1.StorageClassStorage{Name: name}}
}

// routerOn sets dataPath.mode Router on p, with the router's settings r.
func routerOn(p *pipelinev1.Pipeline, r *pipelinev1.Router) {
	p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter, Router: r}
}

// expectInvalid checks that err is the apiserver's Invalid refusal and names field and message.
func expectInvalid(err error, field, message string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "the apiserver accepted it")
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
	Expect(err.Error()).To(ContainSubstring(field))
	Expect(err.Error()).To(ContainSubstring(message))
}

func nodeNamed(ctx context.Context, name string) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, node))).To(Succeed())
}

var _ = Describe("Pipeline admission", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		warned.take()
	})

	It("accepts the sample verbatim and stores every default", func(ctx SpecContext) {
		for _, n := range []string{"xx-test-node236", "xx-test-node239"} {
			nodeNamed(ctx, n)
		}
		p := sample(ns)
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(warned.take()).To(BeEmpty())

		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		steps := got.Spec.Steps
		Expect(steps[0].Name).To(Equal("step-1"))
		Expect(steps[1].Name).To(Equal("step-2"))
		Expect(steps[0].Replicas).To(HaveValue(BeEquivalentTo(1)))
		Expect(steps[1].Replicas).To(HaveValue(BeEquivalentTo(1)))
		Expect(steps[0].Port).To(HaveValue(BeEquivalentTo(9080)))
		Expect(steps[1].Port).To(HaveValue(BeEquivalentTo(80)))
		m := got.Spec.ModelStorage
		Expect(m.Type).To(Equal(pipelinev1.ModelStorageTypeNFS))
		Expect(m.NFS).To(HaveValue(And(HaveField("Server", "192.168.20.235"), HaveField("Path", "/home/aiedge/csiTest"))))
		Expect(m.NFS.Capacity).To(HaveValue(Equal(resource.MustParse("1Gi"))))
		Expect(m.NFS.AccessModes).To(Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}))
		Expect(m.MountPath).To(Equal("/models"))
		Expect(got.Finalizers).To(Equal([]string{pipelinev1.CleanupFinalizer}), "the operator's finalizer is added at creation")

		By("an update that sends the Pipeline back unchanged is accepted and changes nothing")
		again := got.DeepCopy()
		Expect(k8sClient.Update(ctx, again)).To(Succeed())
		Expect(again.Generation).To(Equal(got.Generation))
	})

	It("names a step written without a name after its position", func(ctx SpecContext) {
		p := sample(ns)
		p.Spec.Steps[1].Name = ""
		Expect(k8sClient.Create(ctx, p)).To(Succeed())

		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		Expect(got.Spec.Steps[1].Name).To(Equal("step-2"))
	})

	It("keeps what the user set", func(ctx SpecContext) {
		p := sample(ns)
		p.Spec.Steps[0].Name = "detect"
		p.Spec.Steps[1].Replicas = ptr.To[int32](3)
		p.Spec.Steps[1].Port = ptr.To[int32](8080)
		p.Spec.ModelStorage = existingClaim("models")
		p.Spec.ModelStorage.MountPath = "/data/models"
		Expect(k8sClient.Create(ctx, p)).To(Succeed())

		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		Expect(got.Spec.Steps[0].Name).To(Equal("detect"))
		Expect(got.Spec.Steps[1].Replicas).To(HaveValue(BeEquivalentTo(3)))
		Expect(got.Spec.Steps[1].Port).To(HaveValue(BeEquivalentTo(8080)))
		Expect(got.Spec.ModelStorage.MountPath).To(Equal("/data/models"))
		Expect(got.Spec.ModelStorage.ExistingClaim).To(Equal(&pipelinev1.ExistingClaimStorage{Name: "models"}),
			"an existing claim has the size it has")
	})

	It("lets a step that had the default replicas become autoscaled, and stores the autoscaling defaults", func(ctx SpecContext) {
		p := sample(ns)
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		Expect(p.Spec.Steps[1].Replicas).To(HaveValue(BeEquivalentTo(1)), "the default replicas is stored")
		warned.take()

		p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 4}
		p.Spec.Steps[0].Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 4, TargetMemoryUtilizationPercentage: ptr.To[int32](75)}
		p.Spec.Steps[0].Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		for i := range p.Spec.Steps {
			Expect(p.Spec.Steps[i].Replicas).To(BeNil(), "the default replicas goes with autoscaling")
			Expect(p.Spec.Steps[i].Autoscaling.MinReplicas).To(HaveValue(BeEquivalentTo(1)))
		}
		Expect(p.Spec.Steps[1].Autoscaling.TargetCPUUtilizationPercentage).To(HaveValue(BeEquivalentTo(80)), "no target: 80% CPU")
		Expect(p.Spec.Steps[0].Autoscaling.TargetCPUUtilizationPercentage).To(BeNil(), "a memory target alone stays alone")
		warnings := warned.take()
		Expect(warnings).To(ContainElement(
			"step step-2: autoscaling on CPU needs resources.requests.cpu: without it the autoscaler cannot measure utilization and does not scale"))
		Expect(warnings).NotTo(ContainElement(ContainSubstring("step step-1: autoscaling")), "step-1 requests the memory it targets")

		By("replicas other than the default are refused together with autoscaling")
		p.Spec.Steps[1].Replicas = ptr.To[int32](3)
		Expect(k8sClient.Update(ctx, p)).To(MatchError(ContainSubstring("set replicas or autoscaling, not both")))
	})

	It("lets the listenPort variable alone change the port that was its value", func(ctx SpecContext) {
		p := sample(ns)
		p.Spec.Steps[0].Env = []corev1.EnvVar{{Name: pipelinev1.ListenPortEnv, Value: "9080"}}
		p.Spec.Steps[1].Port = ptr.To[int32](8080)
		p.Spec.Steps[1].Env = []corev1.EnvVar{{Name: pipelinev1.ListenPortEnv, Value: "8080"}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		p.Spec.Steps[0].Env[0].Value = "9090"
		p.Spec.Steps[1].Env[0].Value = "8081"
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		Expect(p.Spec.Steps[0].Port).To(HaveValue(BeEquivalentTo(9090)), "the port follows the variable")
		Expect(p.Spec.Steps[1].Port).To(HaveValue(BeEquivalentTo(8081)))

		By("a port changed together with the variable is the one written")
		p.Spec.Steps[0].Env[0].Value = "9191"
		p.Spec.Steps[0].Port = ptr.To[int32](7070)
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		Expect(p.Spec.Steps[0].Port).To(HaveValue(BeEquivalentTo(7070)))

		By("a value that is no port leaves the port alone")
		p.Spec.Steps[1].Env[0].Value = "http"
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		Expect(p.Spec.Steps[1].Port).To(HaveValue(BeEquivalentTo(8081)))
	})

	It("warns that a new existing claim moves the steps", func(ctx SpecContext) {
		p := sample(ns)
		p.Spec.ModelStorage = existingClaim("models-a")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		warned.take()
		p.Spec.ModelStorage.ExistingClaim.Name = "models-b"
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		Expect(warned.take()).To(ContainElement("modelStorage changed: every step moves to claim models-b (the steps' pods restart); claim models-a stays as it is"))
	})

	DescribeTable("refuses a change of StorageClass storage, whose new claim would start empty, and says how to move",
		func(ctx SpecContext, edit func(m *pipelinev1.ModelStorage)) {
			p := sample(ns)
			p.Spec.ModelStorage = storageClass("fast")
			p.Spec.ModelStorage.StorageClass.Capacity = ptr.To(resource.MustParse("5Gi"))
			p.Spec.ModelStorage.StorageClass.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			stored := p.DeepCopy()
			edit(&p.Spec.ModelStorage)
			err := k8sClient.Update(ctx, p)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			Expect(err.Error()).To(And(ContainSubstring("spec.modelStorage"),
				ContainSubstring("modelStorage of type StorageClass cannot change its type or storageClass"),
				ContainSubstring("copy the models into it, and point the Pipeline at it with modelStorage.type ExistingClaim and existingClaim.name")))

			got := &pipelinev1.Pipeline{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
			Expect(got.Spec.ModelStorage).To(Equal(stored.Spec.ModelStorage), "the stored storage is unchanged")
		},
		Entry("a larger capacity", func(m *pipelinev1.ModelStorage) { m.StorageClass.Capacity = ptr.To(resource.MustParse("10Gi")) }),
		Entry("another StorageClass", func(m *pipelinev1.ModelStorage) { m.StorageClass.Name = "slow" }),
		Entry("other access modes", func(m *pipelinev1.ModelStorage) {
			m.StorageClass.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}
		}),
		Entry("the type changed to ExistingClaim", func(m *pipelinev1.ModelStorage) { *m = existingClaim("copied-models") }),
		Entry("the type changed to NFS", func(m *pipelinev1.ModelStorage) { *m = nfs("10.0.0.2", "/models") }),
	)

	It("lets StorageClass storage move its mount path, and NFS storage change its export", func(ctx SpecContext) {
		for _, n := range []string{"xx-test-node236", "xx-test-node239"} {
			nodeNamed(ctx, n)
		}
		p := sample(ns)
		p.Name = "by-class"
		p.Spec.ModelStorage = storageClass("fast")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		warned.take()
		p.Spec.ModelStorage.MountPath = "/data/models"
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		Expect(warned.take()).To(BeEmpty(), "the claim stays")

		q := sample(ns)
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		warned.take()
		q.Spec.ModelStorage.NFS.Server = "10.0.0.3"
		Expect(k8sClient.Update(ctx, q)).To(Succeed())
		Expect(warned.take()).To(ConsistOf("modelStorage changed: the operator creates a new volume and claim and moves every step onto them " +
			"(the steps' pods restart); then it deletes the old volume and claim, whose reclaim policy Retain leaves the models on the NFS or CSI storage"))
	})

	It("accepts a step named router while the data path is Chain, and defaults the router's replicas", func(ctx SpecContext) {
		p := sample(ns)
		p.Spec.Steps[1].Name = "router"
		p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())

		By("switching to the router is refused until the step is renamed")
		routerOn(p, &pipelinev1.Router{Location: "xx-test-node236"})
		err := k8sClient.Update(ctx, p)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
		Expect(err.Error()).To(ContainSubstring("a step named router would share the name"))
		p.Spec.Steps[1].Name = "recognize"
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		Expect(p.Spec.DataPath.Router.Replicas).To(HaveValue(BeEquivalentTo(2)))

		By("mode Router without settings gets the router's replicas")
		q := sample(ns)
		q.Name = "routed"
		routerOn(q, nil)
		Expect(k8sClient.Create(ctx, q)).To(Succeed())
		Expect(q.Spec.DataPath.Router).NotTo(BeNil())
		Expect(q.Spec.DataPath.Router.Replicas).To(HaveValue(BeEquivalentTo(2)))
	})

	It("accepts steps of the Open Inference Protocol's gRPC service wherever it accepts those of its REST API", func(ctx SpecContext) {
		p := sample(ns)
		p.Name = "grpc-steps"
		routerOn(p, nil)
		first, second := &p.Spec.Steps[0], &p.Spec.Steps[1]
		first.Protocol, first.ModelLoadTimeoutSeconds = pipelinev1.StepProtocolOpenInferenceGRPC, ptr.To[int32](1800)
		first.Inputs, first.Outputs = []pipelinev1.StepTensorInput{{Name: "pixels", Tensor: "image"}}, []string{"boxes"}
		first.StopWhen = "size(tensors.boxes) == 0"
		second.Protocol = pipelinev1.StepProtocolOpenInferenceGRPC
		second.Inputs = []pipelinev1.StepTensorInput{{Name: "boxes", Step: first.Name, Tensor: "boxes"}}
		p.Spec.DataPath.Router = &pipelinev1.Router{Outputs: []pipelinev1.PipelineTensorOutput{
			{Name: "boxes", Step: first.Name, Tensor: "boxes"}, {Name: "labels", Step: second.Name, Tensor: "labels"}}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())

		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		Expect(got.Spec.Steps[0].Protocol).To(Equal(pipelinev1.StepProtocolOpenInferenceGRPC))
		Expect(got.Spec.Steps[0].ModelLoadTimeoutSeconds).To(HaveValue(BeEquivalentTo(1800)))
	})

	It("accepts every storage type", func(ctx SpecContext) {
		byClass := storageClass("fast-rwx")
		byClass.StorageClass.Capacity = ptr.To(resource.MustParse("20Gi"))
		byClass.StorageClass.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		for i, m := range []pipelinev1.ModelStorage{
			nfs("nfs.example.com", "/exports/models"),
			{Type: pipelinev1.ModelStorageTypeCSI, CSI: &pipelinev1.CSIStorage{Driver: "nfs.csi.k8s.io",
				VolumeAttributes: map[string]string{"server": "10.0.0.2", "share": "/models"}}},
			{Type: pipelinev1.ModelStorageTypeCSI, CSI: &pipelinev1.CSIStorage{Driver: "smb.csi.k8s.io",
				VolumeAttributes: map[string]string{"source": "//srv/models"}}},
			byClass,
			existingClaim("team-models"),
		} {
			p := sample(ns)
			p.Name = fmt.Sprintf("storage-%d", i)
			p.Spec.ModelStorage = m
			Expect(k8sClient.Create(ctx, p)).To(Succeed(), "storage %d: %+v", i, m)
		}
	})

	It("warns about what may be fine later", func(ctx SpecContext) {
		p := sample(ns)
		p.Name = "warned"
		p.Spec.Steps[0].Location = "edge-node-not-yet-joined"
		p.Spec.Steps[1].Env = []corev1.EnvVar{{Name: "MODEL_PATH", Value: "/elsewhere"}}
		p.Spec.ModelStorage.NFS.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(warned.take()).To(ConsistOf(
			ContainSubstring(`step step-1: no node "edge-node-not-yet-joined" exists yet`),
			ContainSubstring("step step-2: env MODEL_PATH replaces the value the operator sets"),
			ContainSubstring("modelStorage.nfs.accessModes ReadWriteOnce: steps on 2 different nodes cannot all mount the volume"),
		))

		By("a new node stops the location warning")
		nodeNamed(ctx, "edge-node-not-yet-joined")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		p.Spec.Steps[1].Env = nil
		p.Spec.ModelStorage.NFS.AccessModes = nil
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		Expect(warned.take()).To(ConsistOf(ContainSubstring("modelStorage changed: the operator creates a new volume and claim")),
			"dropping the access modes goes back to the default, which changes the volume")

		By("changing only the mount path keeps the volume: no storage warning")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		p.Spec.ModelStorage.MountPath = "/srv/models"
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		Expect(warned.take()).To(BeEmpty())
	})

	It("gives a new Pipeline the operator's finalizer, in either version, and never adds it back on an update", func(ctx SpecContext) {
		p := sample(ns)
		p.Finalizers = []string{"example.com/keep"}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(p.Finalizers).To(Equal([]string{"example.com/keep", pipelinev1.CleanupFinalizer}))

		By("an update that removes it keeps it removed")
		p.Finalizers = []string{"example.com/keep"}
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		Expect(got.Finalizers).To(Equal([]string{"example.com/keep"}))

		By("a dry run shows it, a v1beta1 create gets it")
		dry := sample(ns)
		dry.Name = "dry"
		Expect(k8sClient.Create(ctx, dry, client.DryRunAll)).To(Succeed())
		Expect(dry.Finalizers).To(Equal([]string{pipelinev1.CleanupFinalizer}))
		old := sampleV1beta1(ns)
		old.Name = "written-as-v1beta1"
		Expect(k8sClient.Create(ctx, old)).To(Succeed())
		Expect(old.Finalizers).To(Equal([]string{pipelinev1.CleanupFinalizer}))
	})

	It("lets a Pipeline being deleted lose its finalizer", func(ctx SpecContext) {
		p := sample(ns)
		p.Finalizers = []string{"distri-infer.ndsl.cn/cleanup"}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		p.Finalizers = nil
		Expect(k8sClient.Update(ctx, p)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &pipelinev1.Pipeline{}))
		}).Should(BeTrue())
	})

	It("refuses a toleration of every taint in a v1beta1 request too, naming its field", func(ctx SpecContext) {
		p := sampleV1beta1(ns)
		p.Spec.Steps[1].Tolerations = []corev1.Toleration{{Key: "edge", Operator: corev1.TolerationOpExists}, {Operator: corev1.TolerationOpExists}}
		expectInvalid(k8sClient.Create(ctx, p), "spec.steps[1].tolerations[1]: Forbidden", "a toleration without a key tolerates every taint")

		By("an update that adds one is refused the same way")
		p = sampleV1beta1(ns)
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		p.Spec.Steps[0].Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		expectInvalid(k8sClient.Update(ctx, p), "spec.steps[0].tolerations[0]: Forbidden", "a toleration without a key tolerates every taint")
	})

	DescribeTable("refuses a bad Pipeline with a message that says what to fix",
		func(ctx SpecContext, mutate func(p *pipelinev1.Pipeline), field, message string) {
			p := sample(ns)
			mutate(p)
			expectInvalid(k8sClient.Create(ctx, p), field, message)
		},
		Entry("no steps", func(p *pipelinev1.Pipeline) { p.Spec.Steps = []pipelinev1.Step{} },
			"spec.steps", "Required value"),
		Entry("a stopWhen that does not compile", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].StopWhen = "response.faces ==" },
			"spec.steps[0].stopWhen", "not a valid CEL condition"),
		Entry("a stopWhen that is not a bool", func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].StopWhen = "status + 1" },
			"spec.steps[1].stopWhen", "must be a bool"),
		Entry("a step named router with the router on", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Name = "router"
			routerOn(p, nil)
		}, "spec", "a step named router would share the name <pipeline>-router"),
		Entry("router settings without the router", func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain, Router: &pipelinev1.Router{Replicas: ptr.To[int32](3)}}
		}, "spec.dataPath", "dataPath.router configures the router, which runs only with dataPath.mode Router"),
		Entry("a step timeout above an hour", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].TimeoutSeconds = ptr.To[int32](3601) },
			"spec.steps[0].timeoutSeconds", "should be less than or equal to 3600"),
		Entry("more than 10 retries", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Retries = ptr.To[int32](11) },
			"spec.steps[0].retries", "should be less than or equal to 10"),
		Entry("no router replicas", func(p *pipelinev1.Pipeline) { routerOn(p, &pipelinev1.Router{Replicas: ptr.To[int32](0)}) },
			"spec.dataPath.router.replicas", "should be greater than or equal to 1"),
		Entry("more than 32 steps", func(p *pipelinev1.Pipeline) {
			for len(p.Spec.Steps) <= 32 {
				s := *p.Spec.Steps[1].DeepCopy()
				s.Name = fmt.Sprintf("step-%d", len(p.Spec.Steps)+1)
				p.Spec.Steps = append(p.Spec.Steps, s)
			}
		}, "spec.steps", "must have at most 32 items"),
		Entry("an invalid Pipeline name", func(p *pipelinev1.Pipeline) { p.Name = "face.detection" },
			"metadata.name", "at most 63 characters of lowercase letters, digits and '-'"),
		Entry("an image with a trailing space", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Image = "nginx:latest " },
			"spec.steps[0].image", "not a valid image reference"),
		Entry("an image in capitals", func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Image = "NGINX" },
			"spec.steps[1].image", "not a valid image reference"),
		Entry("an image with a broken digest", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Image = "nginx@sha256:abc" },
			"spec.steps[0].image", "not a valid image reference"),
		Entry("no image", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Image = "" },
			"spec.steps[0].image", "Required value"),
		Entry("a location with an empty DNS label", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Location = "edge..node" },
			"spec.steps[0].location", "not a valid node name"),
		Entry("a location in capitals", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Location = "Edge_Node" },
			"spec.steps[0].location", "should match"),
		Entry("a fallback location with an empty DNS label", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].FallbackLocations = []string{"edge-b", "edge..node"}
		}, "spec.steps[0].fallbackLocations[1]", "not a valid node name"),
		Entry("fallbackLocations without location", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].Location, p.Spec.Steps[0].FallbackLocations = "", []string{"edge-b"}
		}, "spec.steps[0]", "fallbackLocations needs location"),
		Entry("modelLoadTimeoutSeconds without the Open Inference Protocol", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].ModelLoadTimeoutSeconds = ptr.To[int32](900)
		}, "spec.steps[1]", "modelLoadTimeoutSeconds is the patience of the default startup probe of protocols OpenInferenceProtocol and OpenInferenceProtocolGRPC"),
		Entry("modelLoadTimeoutSeconds beside the step's own startupProbe", func(p *pipelinev1.Pipeline) {
			s := &p.Spec.Steps[1]
			s.Protocol, s.ModelLoadTimeoutSeconds = pipelinev1.StepProtocolOpenInference, ptr.To[int32](900)
			s.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
		}, "spec.steps[1]", "declare no startupProbe, or remove modelLoadTimeoutSeconds"),
		Entry("inputs without the Open Inference Protocol", func(p *pipelinev1.Pipeline) {
			routerOn(p, nil)
			p.Spec.Steps[1].Inputs = []pipelinev1.StepTensorInput{{Name: "x", Tensor: "input0"}}
		}, "spec.steps[1]", "inputs map tensors of the Open Inference Protocol: set protocol to OpenInferenceProtocol or OpenInferenceProtocolGRPC, or remove inputs"),
		Entry("inputs in mode Chain", func(p *pipelinev1.Pipeline) {
			s := &p.Spec.Steps[1]
			s.Protocol, s.Inputs = pipelinev1.StepProtocolOpenInference, []pipelinev1.StepTensorInput{{Name: "x", Tensor: "input0"}}
		}, "spec.steps[1].inputs", "the router makes a step's request of its inputs: set dataPath.mode to Router, or remove inputs"),
		Entry("an input from a later step", func(p *pipelinev1.Pipeline) {
			routerOn(p, nil)
			for i := range p.Spec.Steps {
				p.Spec.Steps[i].Protocol = pipelinev1.StepProtocolOpenInference
			}
			p.Spec.Steps[0].Inputs = []pipelinev1.StepTensorInput{{Name: "x", Step: p.Spec.Steps[1].Name, Tensor: "y"}}
		}, "spec.steps[0].inputs[0].step", "not an earlier step"),
		Entry("an input from a step that is not of the Open Inference Protocol", func(p *pipelinev1.Pipeline) {
			routerOn(p, nil)
			s := &p.Spec.Steps[1]
			s.Protocol = pipelinev1.StepProtocolOpenInference
			s.Inputs = []pipelinev1.StepTensorInput{{Name: "x", Step: p.Spec.Steps[0].Name, Tensor: "y"}}
		}, "spec.steps[1].inputs[0].step", "that step's protocol is neither OpenInferenceProtocol nor OpenInferenceProtocolGRPC"),
		Entry("an input mapped twice", func(p *pipelinev1.Pipeline) {
			routerOn(p, nil)
			s := &p.Spec.Steps[1]
			s.Protocol = pipelinev1.StepProtocolOpenInference
			s.Inputs = []pipelinev1.StepTensorInput{{Name: "x", Tensor: "a"}, {Name: "x", Tensor: "b"}}
		}, "spec.steps[1].inputs[1]", "Duplicate value"),
		Entry("an answer's tensor from no step", func(p *pipelinev1.Pipeline) {
			routerOn(p, &pipelinev1.Router{Outputs: []pipelinev1.PipelineTensorOutput{{Name: "y", Step: "nowhere", Tensor: "y"}}})
		}, "spec.dataPath.router.outputs[0].step", "not a step of this Pipeline: name the step whose answer has the tensor"),
		Entry("an answer's tensor from a step that is not of the Open Inference Protocol", func(p *pipelinev1.Pipeline) {
			routerOn(p, &pipelinev1.Router{Outputs: []pipelinev1.PipelineTensorOutput{{Name: "y", Step: p.Spec.Steps[0].Name, Tensor: "y"}}})
		}, "spec.dataPath.router.outputs[0].step", "that step's protocol is neither OpenInferenceProtocol nor OpenInferenceProtocolGRPC: only their answers have output tensors"),
		Entry("an answer naming a tensor twice", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].Protocol = pipelinev1.StepProtocolOpenInference
			name := p.Spec.Steps[0].Name
			routerOn(p, &pipelinev1.Router{Outputs: []pipelinev1.PipelineTensorOutput{{Name: "y", Step: name, Tensor: "a"}, {Name: "y", Step: name, Tensor: "b"}}})
		}, "spec.dataPath.router.outputs[1]", "Duplicate value"),
		Entry("outputs without inputs", func(p *pipelinev1.Pipeline) {
			routerOn(p, nil)
			p.Spec.Steps[1].Protocol, p.Spec.Steps[1].Outputs = pipelinev1.StepProtocolOpenInference, []string{"y"}
		}, "spec.steps[1]", "outputs are asked for in the request the router makes of inputs: add inputs, or remove outputs"),
		Entry("an input of a tensor the step before does not ask for", func(p *pipelinev1.Pipeline) {
			routerOn(p, nil)
			for i := range p.Spec.Steps {
				p.Spec.Steps[i].Protocol = pipelinev1.StepProtocolOpenInference
			}
			first := &p.Spec.Steps[0]
			first.Inputs, first.Outputs = []pipelinev1.StepTensorInput{{Name: "x", Tensor: "x"}}, []string{"y", "norm"}
			p.Spec.Steps[1].Inputs = []pipelinev1.StepTensorInput{{Name: "x", Step: first.Name, Tensor: "logits"}}
		}, "spec.steps[1].inputs[0].tensor", "asks its model only for the outputs y, norm: add the tensor to its outputs"),
		Entry("an answer's tensor the step does not ask for", func(p *pipelinev1.Pipeline) {
			first := &p.Spec.Steps[0]
			first.Protocol = pipelinev1.StepProtocolOpenInference
			first.Inputs, first.Outputs = []pipelinev1.StepTensorInput{{Name: "x", Tensor: "x"}}, []string{"y"}
			routerOn(p, &pipelinev1.Router{Outputs: []pipelinev1.PipelineTensorOutput{{Name: "z", Step: first.Name, Tensor: "z"}}})
		}, "spec.dataPath.router.outputs[0].tensor", "asks its model only for the outputs y: add the tensor to its outputs"),
		Entry("an unknown protocol", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Protocol = "gRPC" },
			"spec.steps[0].protocol", `supported values: "HTTP", "OpenInferenceProtocol", "OpenInferenceProtocolGRPC"`),
		Entry("fallbackLocations repeating location", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].FallbackLocations = []string{p.Spec.Steps[0].Location}
		}, "spec.steps[0]", "fallbackLocations must not repeat location"),
		Entry("a fallback node twice", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].FallbackLocations = []string{"edge-b", "edge-b"} },
			"spec.steps[0].fallbackLocations", "fallbackLocations must not name a node twice"),
		Entry("a router location with an empty DNS label", func(p *pipelinev1.Pipeline) {
			routerOn(p, &pipelinev1.Router{Location: "edge..node"})
		}, "spec.dataPath.router.location", "not a valid node name"),
		Entry("a router fallback location with an empty DNS label", func(p *pipelinev1.Pipeline) {
			routerOn(p, &pipelinev1.Router{Location: "edge-a", FallbackLocations: []string{"edge..node"}})
		}, "spec.dataPath.router.fallbackLocations[0]", "not a valid node name"),
		Entry("router fallbackLocations without location", func(p *pipelinev1.Pipeline) {
			routerOn(p, &pipelinev1.Router{FallbackLocations: []string{"edge-b"}})
		}, "spec.dataPath.router", "router.fallbackLocations needs router.location"),
		Entry("router fallbackLocations repeating location", func(p *pipelinev1.Pipeline) {
			routerOn(p, &pipelinev1.Router{Location: "edge-a", FallbackLocations: []string{"edge-a"}})
		}, "spec.dataPath.router", "router.fallbackLocations must not repeat router.location"),
		Entry("a router fallback node twice", func(p *pipelinev1.Pipeline) {
			routerOn(p, &pipelinev1.Router{Location: "edge-a", FallbackLocations: []string{"edge-b", "edge-b"}})
		}, "spec.dataPath.router.fallbackLocations", "router.fallbackLocations must not name a node twice"),
		Entry("more than 8 router fallbacks", func(p *pipelinev1.Pipeline) {
			routerOn(p, &pipelinev1.Router{Location: "edge-a", FallbackLocations: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}})
		}, "spec.dataPath.router.fallbackLocations", "must have at most 8 items"),
		Entry("a header the router sets itself", func(p *pipelinev1.Pipeline) {
			routerOn(p, &pipelinev1.Router{PropagateHeaders: []pipelinev1.HeaderName{"X-Request-Id"}})
		}, "spec.dataPath.router.propagateHeaders[0]", "set by the router itself"),
		Entry("a header of one connection", func(p *pipelinev1.Pipeline) {
			routerOn(p, &pipelinev1.Router{PropagateHeaders: []pipelinev1.HeaderName{"X-User", "Proxy-Authorization"}})
		}, "spec.dataPath.router.propagateHeaders[1]", "belongs to one connection: the router never passes it on"),
		Entry("no model", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Model = "" },
			"spec.steps[0].model", "Required value"),
		Entry("a model outside the storage", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Model = "../secrets" },
			"spec.steps[0].model", "must not contain '.' or '..' path segments"),
		Entry("a port out of range", func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Port = ptr.To[int32](70000) },
			"spec.steps[1].port", "should be less than or equal to 65535"),
		Entry("zero replicas", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Replicas = ptr.To[int32](0) },
			"spec.steps[0].replicas", "should be greater than or equal to 1"),
		Entry("replicas and autoscaling", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Replicas = ptr.To[int32](2)
			p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 4}
		}, "spec.steps[1]", "set replicas or autoscaling, not both"),
		Entry("autoscaling with minReplicas above maxReplicas", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MinReplicas: ptr.To[int32](3), MaxReplicas: 2}
		}, "spec.steps[1].autoscaling", "autoscaling.minReplicas must not exceed autoscaling.maxReplicas"),
		Entry("autoscaling without maxReplicas", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{}
		}, "spec.steps[1].autoscaling.maxReplicas", "Required value"),
		Entry("two steps with one name", func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Name = p.Spec.Steps[0].Name },
			"spec.steps[1]", "Duplicate value"),
		Entry("a step without a name, whose default name another step has", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].Name, p.Spec.Steps[1].Name = "", "step-1"
		}, "spec.steps[0].name", "Required value"),
		Entry("a step name in capitals", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Name = "Detect" },
			"spec.steps[0].name", "should match"),
		Entry("a step name too long for its objects", func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Name = strings.Repeat("a", 41) },
			"spec.steps[0].name", "may not be more than 40"),
		Entry("an env name with '='", func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Env = []corev1.EnvVar{{Name: "A=B", Value: "1"}} },
			"spec.steps[1].env[A=B].name", "environment variable names must be non-empty and contain no '='"),
		Entry("an env entry with value and valueFrom", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Env = []corev1.EnvVar{{Name: "POD", Value: "x",
				ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}, "spec.steps[1].env[POD]", "set value or valueFrom, not both"),
		Entry("requests above limits", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].Resources = &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			}
		}, "spec.steps[0].resources.requests[memory]", "must not exceed the limit 1Gi"),
		Entry("a node selector on the hostname", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].NodeSelector = map[string]string{"kubernetes.io/hostname": "other"}
		}, "spec.steps[0].nodeSelector[kubernetes.io/hostname]", "use location to choose the node"),
		Entry("a node selector key that is no label key", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].NodeSelector = map[string]string{"gpu type": "a100"}
		}, "spec.steps[0].nodeSelector[gpu type]", "not a valid label key"),
		Entry("a toleration with an unknown operator", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].Tolerations = []corev1.Toleration{{Key: "gpu", Operator: "Maybe"}}
		}, "spec.steps[0].tolerations[0].operator", "Unsupported value"),
		Entry("a toleration of every taint", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}, {Operator: corev1.TolerationOpExists}}
		}, "spec.steps[0].tolerations[1]: Forbidden", "a toleration without a key tolerates every taint"),
		Entry("a toleration of every NoExecute taint", func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
		}, "spec.steps[1].tolerations[0]: Forbidden", "a toleration without a key tolerates every taint"),
		Entry("a storage type in v1beta1's spelling", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.Type = "nfs" },
			"spec.modelStorage.type", "Unsupported value"),
		Entry("type NFS without its member", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS = nil },
			"spec.modelStorage", "modelStorage.nfs is set with modelStorage.type NFS, and only then"),
		Entry("a second member", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage.CSI = &pipelinev1.CSIStorage{Driver: "nfs.csi.k8s.io", VolumeAttributes: map[string]string{"server": "a"}}
		}, "spec.modelStorage", "modelStorage.csi is set with modelStorage.type CSI, and only then"),
		Entry("NFS without a server", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS.Server = "" },
			"spec.modelStorage.nfs.server", "Required value"),
		Entry("an NFS server that is no host", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS.Server = "nfs server!" },
			"spec.modelStorage.nfs.server", "must be an IP address or a DNS name of the NFS server"),
		Entry("a relative NFS path", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS.Path = "home/models" },
			"spec.modelStorage.nfs.path", "nfs.path must be an absolute path on the NFS server"),
		Entry("an NFS path with '..'", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS.Path = "/home/../models" },
			"spec.modelStorage.nfs.path", "must be a clean absolute path (/models)"),
		Entry("CSI without volume attributes", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI, CSI: &pipelinev1.CSIStorage{Driver: "nfs.csi.k8s.io"}}
		}, "spec.modelStorage.csi.volumeAttributes", "Required value"),
		Entry("a CSI driver that is no driver name", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
				CSI: &pipelinev1.CSIStorage{Driver: "NFS_Driver", VolumeAttributes: map[string]string{"server": "a", "share": "/b"}}}
		}, "spec.modelStorage.csi.driver", "csi.driver must be a CSI driver name"),
		Entry("a CSI volume attribute too long", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
				CSI: &pipelinev1.CSIStorage{Driver: "nfs.csi.k8s.io", VolumeAttributes: map[string]string{"server": strings.Repeat("a", 4097)}}}
		}, "spec.modelStorage.csi.volumeAttributes", "csi.volumeAttributes keys must be at most 253 characters and values at most 4096"),
		Entry("type StorageClass without its member", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass}
		}, "spec.modelStorage", "modelStorage.storageClass is set with modelStorage.type StorageClass, and only then"),
		Entry("a StorageClass member with type NFS", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage.StorageClass = &pipelinev1.StorageClassStorage{Name: "fast"}
		}, "spec.modelStorage", "modelStorage.storageClass is set with modelStorage.type StorageClass, and only then"),
		Entry("a StorageClass name that is no object name", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage = storageClass("Fast_SSD") },
			"spec.modelStorage.storageClass.name", "not a valid StorageClass name"),
		Entry("type ExistingClaim without its member", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim}
		}, "spec.modelStorage", "modelStorage.existingClaim is set with modelStorage.type ExistingClaim, and only then"),
		Entry("a claim name that is no object name", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage = existingClaim("Team_Models") },
			"spec.modelStorage.existingClaim.name", "not a valid claim name"),
		Entry("type ModelStorageClass without its member", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass}
		}, "spec.modelStorage", "modelStorage.modelStorageClass is set with modelStorage.type ModelStorageClass, and only then"),
		Entry("a ModelStorageClass that does not exist", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
				ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: "nowhere"}}
		}, "spec.modelStorage.modelStorageClass.name", "ModelStorageClass nowhere does not exist"),
		Entry("a zero capacity", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS.Capacity = ptr.To(resource.MustParse("0")) },
			"spec.modelStorage.nfs.capacity", "must be greater than zero"),
		Entry("an unknown access mode", func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage.NFS.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadSometimes"}
		}, "spec.modelStorage.nfs.accessModes[0]", "Unsupported value"),
		Entry("a relative mount path", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.MountPath = "models" },
			"spec.modelStorage.mountPath", "should match '^/'"),
		Entry("the root as mount path", func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.MountPath = "/" },
			"spec.modelStorage.mountPath", "must not be the root directory"),
		Entry("an unknown entry Service type", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{ServiceType: "ExternalName"}
		}, "spec.expose.serviceType", "Unsupported value"),
		Entry("an Ingress host that is no DNS name", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "Infer_Example"}}
		}, "spec.expose.ingress.host", "ingress.host must be a DNS name (a DNS-1123 subdomain"),
		Entry("an Ingress host that is an address", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "10.1.2.3"}}
		}, "spec.expose.ingress.host", "ingress.host must be a DNS name, not an IP address"),
		Entry("an Ingress TLS secret without a host", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{TLSSecretName: "infer-tls"}}
		}, "spec.expose.ingress", "ingress.tlsSecretName needs ingress.host"),
		Entry("a relative Ingress path", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Path: "infer"}}
		}, "spec.expose.ingress.path", "ingress.path must start with '/'"),
		Entry("an Ingress path with '..'", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Path: "/a/../b"}}
		}, "spec.expose.ingress.path", "ingress.path must not contain '//', '.' or '..' segments"),
		Entry("an Ingress path with a '?'", func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Path: "/infer?x=1"}}
		}, "spec.expose.ingress.path", "ingress.path must not contain spaces, '?' or '#'"),
	)
})
