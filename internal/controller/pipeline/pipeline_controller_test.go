package pipeline

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
	"github.com/ndsl-cn/pipeline-operator/internal/version"
)

// newNamespace creates a namespace of the test's own.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "pipeline-test-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// createSample creates the sample Pipeline of the product design in ns, as v1 holds it: the
// v1beta1 seed converted, with the conversion data that keeps its listenPort argument first.
func createSample(ctx context.Context, ns string, edit ...func(*pipelinev1.Pipeline)) *pipelinev1.Pipeline {
	GinkgoHelper()
	p := testenv.Sample(GinkgoT(), ns)
	p.UID = ""
	for _, e := range edit {
		e(p)
	}
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	return p
}

func getPipeline(ctx context.Context, p *pipelinev1.Pipeline) *pipelinev1.Pipeline {
	GinkgoHelper()
	out := &pipelinev1.Pipeline{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), out)).To(Succeed())
	return out
}

// updatePipeline applies edit to the latest version of p, retrying on conflicts.
func updatePipeline(ctx context.Context, p *pipelinev1.Pipeline, edit func(*pipelinev1.Pipeline)) {
	GinkgoHelper()
	Eventually(func() error {
		latest := getPipeline(ctx, p)
		edit(latest)
		return k8sClient.Update(ctx, latest)
	}).Should(Succeed())
}

func phase(ctx context.Context, p *pipelinev1.Pipeline) func() pipelinev1.PipelinePhase {
	return func() pipelinev1.PipelinePhase { return getPipeline(ctx, p).Status.Phase }
}

func condition(ctx context.Context, p *pipelinev1.Pipeline, t string) func() *metav1.Condition {
	return func() *metav1.Condition { return meta.FindStatusCondition(getPipeline(ctx, p).Status.Conditions, t) }
}

// child waits for the object key names and returns it.
func child[T client.Object](ctx context.Context, obj T, ns, name string) T {
	GinkgoHelper()
	Eventually(func() error { return k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj) }).Should(Succeed())
	return obj
}

func deploymentOf(ctx context.Context, p *pipelinev1.Pipeline, i int) *appsv1.Deployment {
	GinkgoHelper()
	return child(ctx, &appsv1.Deployment{}, p.Namespace, resources.StepObjectName(p, i))
}

func serviceOf(ctx context.Context, p *pipelinev1.Pipeline, i int) *corev1.Service {
	GinkgoHelper()
	return child(ctx, &corev1.Service{}, p.Namespace, resources.StepObjectName(p, i))
}

// bindStorage plays the volume binder: the PV and PVC of p become Bound.
func bindStorage(ctx context.Context, p *pipelinev1.Pipeline) {
	GinkgoHelper()
	if resources.OwnsVolume(p) {
		pv := child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))
		pv.Status.Phase = corev1.VolumeBound
		Expect(k8sClient.Status().Update(ctx, pv)).To(Succeed())
	}
	pvc := child(ctx, &corev1.PersistentVolumeClaim{}, p.Namespace, resources.ClaimName(p))
	pvc.Status.Phase = corev1.ClaimBound
	Expect(k8sClient.Status().Update(ctx, pvc)).To(Succeed())
}

// rollOut plays the deployment controller: every step's current Deployment becomes available.
func rollOut(ctx context.Context, p *pipelinev1.Pipeline) {
	GinkgoHelper()
	for i := range p.Spec.Steps {
		setStepDeploymentReady(ctx, p, i, -1)
	}
}

// setStepDeploymentReady plays the deployment controller for step i: every pod of its current
// Deployment is updated, and ready of them are ready (-1: all).
func setStepDeploymentReady(ctx context.Context, p *pipelinev1.Pipeline, i int, ready int32) {
	GinkgoHelper()
	Eventually(func() error {
		d := deploymentOf(ctx, p, i)
		r := ptr.Deref(d.Spec.Replicas, 1)
		if ready < 0 {
			ready = r
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: r, UpdatedReplicas: r,
			ReadyReplicas: ready, AvailableReplicas: ready}
		return k8sClient.Status().Update(ctx, d)
	}).Should(Succeed())
}

// runningSample creates the sample and plays the cluster until it is running.
func runningSample(ctx context.Context, ns string, edit ...func(*pipelinev1.Pipeline)) *pipelinev1.Pipeline {
	GinkgoHelper()
	p := createSample(ctx, ns, edit...)
	Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseCreating))
	bindStorage(ctx, p)
	rollOut(ctx, p)
	Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	return getPipeline(ctx, p)
}

func envOf(d *appsv1.Deployment) map[string]string {
	return testenv.EnvMap(d.Spec.Template.Spec.Containers[0].Env)
}

// eventNotes are the notes of the events recorded on p.
func eventNotes(ctx context.Context, p *pipelinev1.Pipeline) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		Expect(k8sClient.List(ctx, list, client.InNamespace(p.Namespace))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Pipeline" && e.Regarding.Name == p.Name {
				notes = append(notes, e.Reason+": "+e.Note)
			}
		}
		return notes
	}
}

var _ = Describe("Pipeline reconciler", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("creates every child of the design's Pipeline, applied verbatim", func() {
		p := createSample(ctx, ns)

		By("storing a finalizer so that the PersistentVolume can be removed")
		Eventually(func() []string { return getPipeline(ctx, p).Finalizers }).Should(ContainElement(Finalizer))

		By("creating an NFS PersistentVolume reserved for the claim")
		pv := child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))
		Expect(pv.Spec.NFS).To(Equal(&corev1.NFSVolumeSource{Server: "192.168.20.235", Path: "/home/aiedge/csiTest", ReadOnly: true}))
		Expect(pv.Spec.ClaimRef.Name).To(Equal(resources.ClaimName(p)))
		Expect(pv.Spec.ClaimRef.Namespace).To(Equal(ns))
		Expect(pv.Labels).To(HaveKeyWithValue("pipeline", p.Name))

		By("creating a claim bound to exactly that volume")
		pvc := child(ctx, &corev1.PersistentVolumeClaim{}, ns, resources.ClaimName(p))
		Expect(pvc.Spec.VolumeName).To(Equal(pv.Name))
		Expect(pvc.OwnerReferences).To(ConsistOf(HaveField("APIVersion", pipelinev1.GroupVersion.String())))

		By("creating a Deployment and a Service per step, pinned and wired")
		d1, d2 := deploymentOf(ctx, p, 0), deploymentOf(ctx, p, 1)
		Expect(d1.Spec.Template.Spec.NodeSelector).To(BeEmpty(), "pinned by node name, not by a label a kubelet can set")
		Expect(d1.Spec.Template.Spec.Affinity).To(Equal(nameAffinity("xx-test-node236")))
		Expect(d2.Spec.Template.Spec.Affinity).To(Equal(nameAffinity("xx-test-node239")))
		Expect(d1.Spec.Template.Spec.Containers[0].Args).To(BeEmpty())
		Expect(envOf(d1)).To(HaveKeyWithValue("listenPort", "9080"))
		Expect(d1.Spec.Template.Spec.Containers[0].Env[0].Name).To(Equal("listenPort"),
			"an arg of the v1beta1 seed stays before the variables the operator sets (its conversion data says so)")
		Expect(d1.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort).To(Equal(int32(9080)))
		Expect(envOf(d1)).To(HaveKeyWithValue(pipelinev1.EnvNextStepURL, fmt.Sprintf("http://facedetection-pipeline-step-2.%s.svc.cluster.local.:80", ns)))
		Expect(envOf(d2)).To(HaveKeyWithValue(pipelinev1.EnvNextStepURL, ""))
		Expect(envOf(d2)).To(HaveKeyWithValue(pipelinev1.EnvModelPath, "/models/facedetection-2"))
		Expect(d1.Labels).To(HaveKeyWithValue("step", "1"))
		Expect(d2.Labels).To(HaveKeyWithValue("step", "2"))
		Expect(metav1.IsControlledBy(d1, getPipeline(ctx, p))).To(BeTrue())
		Expect(metav1.GetControllerOf(d1).APIVersion).To(Equal(pipelinev1.GroupVersion.String()), "owned by the stored version")

		s1, s2 := serviceOf(ctx, p, 0), serviceOf(ctx, p, 1)
		Expect(s1.Spec.Ports[0].Port).To(Equal(int32(9080)))
		Expect(s2.Spec.Ports[0].Port).To(Equal(int32(80)))
		Expect(s1.Spec.Selector).To(Equal(d1.Spec.Selector.MatchLabels))
		Expect(s1.Spec.ClusterIP).NotTo(BeEmpty())

		By("reporting the truth: creating, with every step listed")
		Eventually(func(g Gomega) {
			st := getPipeline(ctx, p).Status
			g.Expect(st.Phase).To(Equal(pipelinev1.PipelinePhaseCreating))
			g.Expect(st.ReadySteps).To(HaveValue(BeZero()))
			g.Expect(st.TotalSteps).To(HaveValue(Equal(int32(2))))
			g.Expect(st.Models).To(Equal([]string{"facedetection-1", "facedetection-2"}))
			g.Expect(st.Steps).To(HaveLen(2))
			g.Expect(st.Steps[0].Name).To(Equal("step-1"))
			g.Expect(st.Steps[0].ServiceState).To(Equal(pipelinev1.ServiceStateReady))
			g.Expect(st.Steps[0].DeploymentState).To(Equal(pipelinev1.DeploymentStateProgressing))
			g.Expect(st.Storage.ClaimState).To(Equal(corev1.ClaimPending))
			g.Expect(meta.IsStatusConditionFalse(st.Conditions, pipelinev1.ConditionAvailable)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, pipelinev1.ConditionProgressing)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, pipelinev1.ConditionReconciled)).To(BeTrue())
			g.Expect(st.ObservedGeneration).To(Equal(getPipeline(ctx, p).Generation))
		}).Should(Succeed())

		By("recording one event that names every child it created")
		Eventually(eventNotes(ctx, p)).Should(ContainElement(fmt.Sprintf(
			"Created: Created Deployment %s, Deployment %s, NetworkPolicy %s, PersistentVolume %s, PersistentVolumeClaim %s, Service %s, Service %s",
			d1.Name, d2.Name, resources.StepsNetworkPolicyName(p), pv.Name, pvc.Name, s1.Name, s2.Name)))
	})

	It("moves from creating to running to failed as its children change", func() {
		p := createSample(ctx, ns)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseCreating))

		bindStorage(ctx, p)
		Eventually(func() corev1.PersistentVolumeClaimPhase { return getPipeline(ctx, p).Status.Storage.ClaimState }).
			Should(Equal(corev1.ClaimBound))
		Expect(getPipeline(ctx, p).Status.Phase).To(Equal(pipelinev1.PipelinePhaseCreating))

		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		st := getPipeline(ctx, p).Status
		Expect(st.ReadySteps).To(HaveValue(Equal(int32(2))))
		Expect(st.TotalSteps).To(HaveValue(Equal(int32(2))))
		Expect(st.Storage.VolumeState).To(Equal(corev1.VolumeBound))
		Expect(st.Steps[1].DeploymentState).To(Equal(pipelinev1.DeploymentStateAvailable))
		Expect(st.Steps[1].ReadyReplicas).To(HaveValue(Equal(int32(1))))
		Expect(meta.IsStatusConditionTrue(st.Conditions, pipelinev1.ConditionAvailable)).To(BeTrue())

		By("a step whose rollout exceeds its progress deadline fails the Pipeline")
		d := deploymentOf(ctx, p, 1)
		d.Status.AvailableReplicas = 0
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet has timed out progressing."}}
		Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseFailed))
		deg := condition(ctx, p, pipelinev1.ConditionDegraded)()
		Expect(deg.Reason).To(Equal(pipelinev1.ReasonStepFailed))
		Expect(deg.Message).To(ContainSubstring("step 2 (step-2)"))
		Expect(deg.Message).To(ContainSubstring("progress deadline"))
		Eventually(eventNotes(ctx, p)).Should(ContainElement(ContainSubstring("StepFailed: step 2 (step-2)")))

		By("recovering when the step rolls out")
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))

		By("a lost claim fails the Pipeline")
		pvc := child(ctx, &corev1.PersistentVolumeClaim{}, ns, resources.ClaimName(p))
		pvc.Status.Phase = corev1.ClaimLost
		Expect(k8sClient.Status().Update(ctx, pvc)).To(Succeed())
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseFailed))
		Expect(condition(ctx, p, pipelinev1.ConditionDegraded)().Reason).To(Equal(pipelinev1.ReasonStorageFailed))
	})

	It("provides CSI storage with its driver and volume attributes", func() {
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
				CSI: &pipelinev1.CSIStorage{Driver: pipelinev1.DefaultCSIDriver,
					VolumeAttributes: map[string]string{"server": "nfs.edge.local", "share": "/models"}}}
		})
		pv := child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))
		Expect(pv.Spec.CSI).NotTo(BeNil())
		Expect(pv.Spec.CSI.Driver).To(Equal("nfs.csi.k8s.io"))
		Expect(pv.Spec.CSI.VolumeAttributes).To(Equal(map[string]string{"server": "nfs.edge.local", "share": "/models"}))
		Expect(pv.Spec.NFS).To(BeNil())
	})

	It("provides StorageClass storage as a claim only", func() {
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass,
				StorageClass: &pipelinev1.StorageClassStorage{Name: "fast", Capacity: ptr.To(resource.MustParse("5Gi"))}}
		})
		pvc := child(ctx, &corev1.PersistentVolumeClaim{}, ns, resources.ClaimName(p))
		Expect(pvc.Spec.StorageClassName).To(Equal(ptr.To("fast")))
		Expect(pvc.Spec.VolumeName).To(BeEmpty())
		Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("5Gi"))
		pvs := &corev1.PersistentVolumeList{}
		Expect(k8sClient.List(ctx, pvs, volumeSelector(p))).To(Succeed())
		Expect(pvs.Items).To(BeEmpty())
		Expect(getPipeline(ctx, p).Status.Storage.VolumeName).To(BeEmpty())
		Expect(getPipeline(ctx, p).Status.Storage.ClaimName).To(Equal(pvc.Name))
	})

	It("mounts an existing claim, waiting for it with a clear reason while it is missing", func() {
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim,
				ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: "team-models"}}
		})
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseFailed))
		deg := condition(ctx, p, pipelinev1.ConditionDegraded)()
		Expect(deg.Reason).To(Equal(pipelinev1.ReasonClaimNotFound))
		Expect(deg.Message).To(ContainSubstring("team-models"))
		Expect(deploymentOf(ctx, p, 0).Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("team-models"))

		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "team-models", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}
		Expect(k8sClient.Create(ctx, claim)).To(Succeed())
		claim.Status.Phase = corev1.ClaimBound
		Expect(k8sClient.Status().Update(ctx, claim)).To(Succeed())
		rollOut(ctx, p)
		Eventually(phase(ctx, p), "40s").Should(Equal(pipelinev1.PipelinePhaseRunning))

		By("never touching the user's claim")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		Expect(claim.OwnerReferences).To(BeEmpty())
		Expect(claim.Labels).To(BeEmpty())
		pvs := &corev1.PersistentVolumeList{}
		Expect(k8sClient.List(ctx, pvs, volumeSelector(p))).To(Succeed())
		Expect(pvs.Items).To(BeEmpty())
	})

	It("puts back children that are deleted or edited", func() {
		p := runningSample(ctx, ns)

		By("recreating a deleted Deployment")
		d := deploymentOf(ctx, p, 0)
		Expect(k8sClient.Delete(ctx, d)).To(Succeed())
		Eventually(func() types.UID { return deploymentOf(ctx, p, 0).UID }).ShouldNot(Equal(d.UID))
		Eventually(eventNotes(ctx, p)).Should(ContainElement("Created: Created Deployment " + d.Name))

		By("restoring an edited image")
		d = deploymentOf(ctx, p, 1)
		d.Spec.Template.Spec.Containers[0].Image = "busybox:edited"
		Expect(k8sClient.Update(ctx, d, client.FieldOwner("kubectl-edit"))).To(Succeed())
		Eventually(func() string { return deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image }).Should(Equal("nginx:latest"))
		Eventually(eventNotes(ctx, p)).Should(ContainElement("Updated: Updated Deployment " + d.Name))

		By("restoring an edited Service selector")
		svc := serviceOf(ctx, p, 0)
		svc.Spec.Selector[resources.LabelPipeline] = "someone-else"
		Expect(k8sClient.Update(ctx, svc, client.FieldOwner("kubectl-edit"))).To(Succeed())
		Eventually(func() map[string]string { return serviceOf(ctx, p, 0).Spec.Selector }).
			Should(HaveKeyWithValue(resources.LabelPipeline, p.Name))

		By("recreating a deleted Service")
		svc = serviceOf(ctx, p, 1)
		Expect(k8sClient.Delete(ctx, svc)).To(Succeed())
		Eventually(func() types.UID { return serviceOf(ctx, p, 1).UID }).ShouldNot(Equal(svc.UID))

		By("leaving alone the fields it does not own")
		d = deploymentOf(ctx, p, 0)
		d.Annotations = map[string]string{"team": "vision"}
		Expect(k8sClient.Update(ctx, d, client.FieldOwner("kubectl-annotate"))).To(Succeed())
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Image = "nginx:1.27" })
		Eventually(func() string { return deploymentOf(ctx, p, 0).Spec.Template.Spec.Containers[0].Image }).Should(Equal("nginx:1.27"))
		Expect(deploymentOf(ctx, p, 0).Annotations).To(HaveKeyWithValue("team", "vision"))
	})

	It("converges when steps are added, removed, reordered or changed", func() {
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].Name = "detect"
			p.Spec.Steps[1].Name = "recognise"
		})

		By("adding a step")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps = append(p.Spec.Steps, pipelinev1.Step{Name: "align", Image: "nginx:latest", Model: "align-1",
				Location: "xx-test-node239"})
		})
		p = getPipeline(ctx, p)
		Expect(deploymentOf(ctx, p, 2).Name).To(Equal("facedetection-pipeline-align"))
		Expect(serviceOf(ctx, p, 2).Name).To(Equal("facedetection-pipeline-align"))
		Eventually(func() string { return envOf(deploymentOf(ctx, p, 1))[pipelinev1.EnvNextStepURL] }).
			Should(Equal(fmt.Sprintf("http://facedetection-pipeline-align.%s.svc.cluster.local.:80", ns)))
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseCreating))

		By("reordering steps: the Deployments keep their names and their forwarding follows the order")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			s := p.Spec.Steps
			p.Spec.Steps = []pipelinev1.Step{s[0], s[2], s[1]}
		})
		p = getPipeline(ctx, p)
		Eventually(func() string { return envOf(deploymentOf(ctx, p, 0))[pipelinev1.EnvNextStepURL] }).
			Should(Equal(fmt.Sprintf("http://facedetection-pipeline-align.%s.svc.cluster.local.:80", ns)))
		Eventually(func() map[string]string { return deploymentOf(ctx, p, 1).Labels }).Should(HaveKeyWithValue("step", "2"))
		Eventually(func() string { return envOf(deploymentOf(ctx, p, 2))[pipelinev1.EnvNextStepURL] }).Should(BeEmpty())

		By("removing a step deletes its Deployment and Service")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps = p.Spec.Steps[:2] })
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "facedetection-pipeline-recognise"}, &appsv1.Deployment{}))
		}).Should(BeTrue())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "facedetection-pipeline-recognise"}, &corev1.Service{}))
		}).Should(BeTrue())
		Eventually(eventNotes(ctx, p)).Should(ContainElement("Deleted: Deleted Deployment facedetection-pipeline-recognise"))

		By("changing image, env and port: the listenPort variable of the v1beta1 seed goes, and its port with it")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].Image = "nginx:1.27"
			p.Spec.Steps[0].Env = []corev1.EnvVar{{Name: "threshold", Value: "0.8"}}
			p.Spec.Steps[0].Port = nil // the CRD defaults it to 80
		})
		p = getPipeline(ctx, p)
		Eventually(func(g Gomega) {
			d := deploymentOf(ctx, p, 0)
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:1.27"))
			g.Expect(envOf(d)).To(HaveKeyWithValue("threshold", "0.8"))
			g.Expect(envOf(d)).NotTo(HaveKey("listenPort"))
			g.Expect(d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort).To(Equal(int32(80)))
			g.Expect(serviceOf(ctx, p, 0).Spec.Ports).To(HaveLen(1))
			g.Expect(serviceOf(ctx, p, 0).Spec.Ports[0].Port).To(Equal(int32(80)))
		}).Should(Succeed())
		// The children were created with a plain create; their first update handed the create's
		// fields over to the operator's apply, which alone owns them now.
		for _, obj := range []client.Object{deploymentOf(ctx, p, 0), serviceOf(ctx, p, 0)} {
			var ours []metav1.ManagedFieldsOperationType
			for _, e := range obj.GetManagedFields() {
				if e.Manager == apply.FieldManager {
					ours = append(ours, e.Operation)
				}
			}
			Expect(ours).To(Equal([]metav1.ManagedFieldsOperationType{metav1.ManagedFieldsOperationApply}), obj.GetName())
		}
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseCreating))
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))

		By("changing the storage replaces the volume and claim and removes the old ones")
		oldPV, oldPVC := resources.PVName(p), resources.ClaimName(p)
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS.Path = "/srv/models" })
		p = getPipeline(ctx, p)
		Expect(resources.PVName(p)).NotTo(Equal(oldPV))
		Expect(child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p)).Spec.NFS.Path).To(Equal("/srv/models"))
		Eventually(func() string {
			return deploymentOf(ctx, p, 0).Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName
		}).Should(Equal(resources.ClaimName(p)))
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", oldPV) }).Should(BeTrue())
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolumeClaim{}, ns, oldPVC) }).Should(BeTrue())
		bindStorage(ctx, p)
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	})

	It("removes the PersistentVolume and releases its finalizer when deleted", func() {
		p := runningSample(ctx, ns)
		pv := resources.PVName(p)
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		Eventually(func() bool { return gone(ctx, &pipelinev1.Pipeline{}, ns, p.Name) }).Should(BeTrue())
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", pv) }).Should(BeTrue())
		// The namespaced children go with the garbage collector, which follows their owner reference.
		owner := And(HaveField("UID", p.UID), HaveField("APIVersion", pipelinev1.GroupVersion.String()), HaveField("Kind", "Pipeline"))
		Expect(deploymentOf(ctx, p, 0).OwnerReferences).To(ConsistOf(owner))
		Expect(child(ctx, &corev1.PersistentVolumeClaim{}, ns, resources.ClaimName(p)).OwnerReferences).To(ConsistOf(owner))
	})

	It("makes no write at all when it reconciles a converged Pipeline again", func() {
		p := runningSample(ctx, ns)
		// Let the manager finish whatever its last pass started.
		Consistently(func() string { return getPipeline(ctx, p).ResourceVersion }).Should(Equal(p.ResourceVersion))

		r, counter := expectNoWritesOnReconcile(ctx, p)

		By("the same reconciler does write when something drifted, so the count can see writes")
		d := deploymentOf(ctx, p, 0)
		d.Spec.Template.Spec.Containers[0].Image = "busybox:drift"
		Expect(k8sClient.Update(ctx, d)).To(Succeed())
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).NotTo(HaveOccurred())
		Expect(counter.writes.Load()).To(BeNumerically(">", 0))
	})

	It("recognises its own children that its cache has not shown yet, and leaves them as they are", func() {
		p := runningSample(ctx, ns)
		Consistently(func() string { return getPipeline(ctx, p).ResourceVersion }).Should(Equal(p.ResourceVersion))
		before := childVersions(ctx, p)

		// A cache that has not seen the children yet: every create is refused as already existing.
		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: testScheme})
		Expect(err).NotTo(HaveOccurred())
		var creates atomic.Int64
		notCached := interceptor.NewClient(direct, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				switch obj.(type) {
				case *appsv1.Deployment, *corev1.Service, *corev1.PersistentVolumeClaim, *corev1.PersistentVolume, *networkingv1.NetworkPolicy:
					return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
				}
				return c.Get(ctx, key, obj, opts...)
			},
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				creates.Add(1)
				return c.Create(ctx, obj, opts...)
			},
		})
		recorder := events.NewFakeRecorder(100)
		r := &Reconciler{Client: notCached, APIReader: direct, Recorder: recorder}
		_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).NotTo(HaveOccurred())
		Expect(creates.Load()).To(BeNumerically("==", 7), "volume, claim, 2 Deployments, 2 Services, the steps' NetworkPolicy")
		Expect(recorder.Events).To(BeEmpty())
		Expect(childVersions(ctx, p)).To(Equal(before))
		Expect(getPipeline(ctx, p).ResourceVersion).To(Equal(p.ResourceVersion))
	})

	It("reports a step pinned to a node that does not exist, and recovers when it joins", func() {
		node := "edge-node-" + ns[len(ns)-5:]
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Location = node })
		bindStorage(ctx, p)
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseFailed))
		deg := condition(ctx, p, pipelinev1.ConditionDegraded)()
		Expect(deg.Reason).To(Equal(pipelinev1.ReasonNodeNotFound))
		Expect(deg.Message).To(ContainSubstring("step 2 (step-2): node " + node + " does not exist"))
		Eventually(eventNotes(ctx, p)).Should(ContainElement(ContainSubstring("NodeNotFound: step 2 (step-2): node " + node)))

		createNode(node)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	})

	It("leaves alone an object of the same name that is not its own", func() {
		foreign := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "facedetection-pipeline-step-2", Namespace: ns},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}},
		}
		Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
		p := createSample(ctx, ns)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseFailed))
		deg := condition(ctx, p, pipelinev1.ConditionDegraded)()
		Expect(deg.Reason).To(Equal(pipelinev1.ReasonNameConflict))
		Expect(deg.Message).To(ContainSubstring("Service facedetection-pipeline-step-2 already exists"))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed())
		Expect(foreign.OwnerReferences).To(BeEmpty())
		Expect(foreign.Spec.Ports[0].Port).To(Equal(int32(5432)))
	})

	It("reports a child the apiserver refuses, retries with back-off, and counts the error", func() {
		// An admission policy, as a cluster's policy engine would have, refuses one child.
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "no-step-2-" + ns},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
					},
				}}},
				Validations: []admissionregistrationv1.Validation{{
					Expression: "!object.metadata.name.endsWith('-step-2')", Message: "services of second steps are not allowed here",
				}},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        policy.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
				MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
			},
		}
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() {
			_ = k8sClient.Delete(context.Background(), binding)
			_ = k8sClient.Delete(context.Background(), policy)
		})
		// The policy takes effect once the apiserver has loaded it.
		Eventually(func() error {
			probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe-step-2", Namespace: ns},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
			err := k8sClient.Create(ctx, probe, client.DryRunAll)
			if err == nil {
				return fmt.Errorf("the policy is not in force yet")
			}
			return nil
		}).Should(Succeed())

		p := createSample(ctx, ns)
		Eventually(func(g Gomega) {
			rec := condition(ctx, p, pipelinev1.ConditionReconciled)()
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(rec.Reason).To(Equal(pipelinev1.ReasonApplyRefused))
			g.Expect(rec.Message).To(ContainSubstring("step 2 (step-2): the apiserver refuses the creation of Service facedetection-pipeline-step-2"))
			g.Expect(rec.Message).To(ContainSubstring("services of second steps are not allowed here"))
		}).Should(Succeed())
		Expect(getPipeline(ctx, p).Status.ObservedGeneration).To(Equal(p.Generation),
			"the refusal is a verdict on this generation, which generic tools read only once it is observed")
		Expect(condition(ctx, p, pipelinev1.ConditionDegraded)()).To(And(HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", pipelinev1.ReasonApplyRefused)), "a refusal needs a person")
		Expect(condition(ctx, p, pipelinev1.ConditionStalled)()).To(And(HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", pipelinev1.ReasonApplyRefused)), "kstatus calls it Failed")
		Eventually(eventNotes(ctx, p)).Should(ContainElement(ContainSubstring(
			"ApplyRefused: step 2 (step-2): the apiserver refuses the creation of Service facedetection-pipeline-step-2")))
		Expect(deploymentOf(ctx, p, 1).Name).To(Equal("facedetection-pipeline-step-2"), "the other children are still made")
		Eventually(func() float64 {
			return gathered(metrics.MetricReconcileErrors, map[string]string{"reason": pipelinev1.ReasonApplyRefused})
		}).Should(BeNumerically(">=", 1))

		By("recovering once the policy is lifted, without anyone touching the Pipeline")
		Expect(k8sClient.Delete(ctx, binding)).To(Succeed())
		bindStorage(ctx, p)
		rollOut(ctx, p)
		Eventually(phase(ctx, p), "60s").Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(meta.IsStatusConditionTrue(getPipeline(ctx, p).Status.Conditions, pipelinev1.ConditionReconciled)).To(BeTrue())
	})

	It("exports the phase of each Pipeline and the duration of its rollout", func() {
		p := runningSample(ctx, ns)
		Eventually(func() float64 {
			return gathered(metrics.MetricPipelinePhase, map[string]string{"namespace": ns, "pipeline": p.Name, "phase": string(pipelinev1.PipelinePhaseRunning)})
		}).Should(Equal(1.0))
		Expect(gathered(metrics.MetricStepReadyReplicas, map[string]string{"namespace": ns, "pipeline": p.Name, "step": "step-2"})).To(Equal(1.0))
		Expect(gathered(metrics.MetricPipelines, map[string]string{"phase": string(pipelinev1.PipelinePhaseRunning)})).To(BeNumerically(">=", 1))
		Expect(gathered(metrics.MetricRolloutDuration+"_count", map[string]string{"trigger": "create"})).To(BeNumerically(">=", 1))
	})

	It("offers the printer columns users rely on", func() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Name: "pipelines.distri-infer.ndsl.cn"}, crd)).To(Succeed())
		columns := map[string][]string{}
		for _, v := range crd.Spec.Versions {
			for _, c := range v.AdditionalPrinterColumns {
				columns[v.Name] = append(columns[v.Name], c.Name+"="+c.JSONPath)
			}
		}
		Expect(columns).To(Equal(map[string][]string{
			"v1beta1": {"Models=.status.models", "Phase=.status.phase", "Ready=.status.readySteps",
				"Detail=.status.detailPhase", "Age=.metadata.creationTimestamp"},
			"v1": {"Ready=.status.ready", "Phase=.status.phase", `Reason=.status.conditions[?(@.type=="Ready")].reason`,
				"Models=.status.modelNames", "URL=.status.url", `Message=.status.conditions[?(@.type=="Ready")].message`,
				"Age=.metadata.creationTimestamp"},
		}))
		By("the status holds what the v1 columns print, signed with the operator's release")
		p := runningSample(ctx, ns)
		Expect(p.Status).To(And(HaveField("Ready", "2/2"), HaveField("ModelNames", "facedetection-1, facedetection-2"),
			HaveField("OperatorVersion", version.Version)))
		// Users' pl and pls, and dipl, distinct beside Tekton's pipelines.
		Expect(crd.Spec.Names.ShortNames).To(ConsistOf("pl", "pls", "dipl"))
	})

	It("keeps objects the operator does not manage out of its cache", func() {
		foreign := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "not-ours", Namespace: ns, Labels: map[string]string{"pipeline": "facedetection-pipeline"}},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}},
			},
		}
		Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
		p := runningSample(ctx, ns)
		cached := &appsv1.DeploymentList{}
		Expect(mgrCache.List(ctx, cached, client.InNamespace(ns))).To(Succeed())
		var names []string
		for _, d := range cached.Items {
			names = append(names, d.Name)
			// Only the marker of a child whose create still owns fields is kept, with no field set.
			Expect(d.ManagedFields).To(Or(BeEmpty(), Equal([]metav1.ManagedFieldsEntry{{Manager: apply.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate}})), "managedFields are stripped from cached objects")
		}
		Expect(names).To(ConsistOf(resources.StepObjectName(p, 0), resources.StepObjectName(p, 1)))
	})
})

// gone reports whether the object is deleted, or is only waiting on other controllers'
// finalizers (envtest runs none of the controllers that would remove them).
func gone(ctx context.Context, obj client.Object, ns, name string) bool {
	err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && !obj.GetDeletionTimestamp().IsZero() && !strings.Contains(strings.Join(obj.GetFinalizers(), ","), Finalizer)
}

// gathered is the value of the metric with the given labels in the suite's registry (a
// histogram's _count when name ends in it), or -1 when there is none.
func gathered(name string, labels map[string]string) float64 {
	families, err := metricsReg.Gather()
	Expect(err).NotTo(HaveOccurred())
	base, count := strings.CutSuffix(name, "_count")
	for _, f := range families {
		if f.GetName() != base {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			switch {
			case count && m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// expectNoWritesOnReconcile runs two passes over the converged Pipeline p with a reconciler
// whose client counts its writes on the wire, and expects no write, no event and an unchanged
// Pipeline. It returns the reconciler and its counter.
func expectNoWritesOnReconcile(ctx context.Context, p *pipelinev1.Pipeline) (*Reconciler, *writeCounter) {
	GinkgoHelper()
	counter := &writeCounter{}
	counting := rest.CopyConfig(cfg)
	counting.Wrap(counter.wrap)
	c, err := client.New(counting, client.Options{Scheme: testScheme})
	Expect(err).NotTo(HaveOccurred())
	recorder := events.NewFakeRecorder(100)
	r := &Reconciler{Client: c, APIReader: c, Recorder: recorder, RouterImage: testenv.RouterImage}
	for range 2 {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		Expect(err).NotTo(HaveOccurred())
	}
	Expect(counter.writes.Load()).To(BeZero())
	Expect(recorder.Events).To(BeEmpty())
	Expect(getPipeline(ctx, p).ResourceVersion).To(Equal(p.ResourceVersion))
	return r, counter
}

// childVersions are the resourceVersions of the children of p, by kind and name.
func childVersions(ctx context.Context, p *pipelinev1.Pipeline) map[string]string {
	GinkgoHelper()
	rv := map[string]string{}
	for _, l := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.PersistentVolumeClaimList{},
		&networkingv1.NetworkPolicyList{}} {
		Expect(k8sClient.List(ctx, l, client.InNamespace(p.Namespace), client.MatchingLabels{resources.LabelPipeline: p.Name})).To(Succeed())
		for _, o := range objects(l) {
			rv[fmt.Sprintf("%T %s", o, o.GetName())] = o.GetResourceVersion()
		}
	}
	pv := child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))
	rv["PersistentVolume "+pv.Name] = pv.ResourceVersion
	return rv
}
