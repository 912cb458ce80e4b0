package pipeline

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// stepPodStatus sets the status of pod, re-read first, to st.
func stepPodStatus(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) {
	GinkgoHelper()
	Eventually(func() error {
		latest := child(ctx, &corev1.Pod{}, pod.Namespace, pod.Name)
		latest.Status = st
		return k8sClient.Status().Update(ctx, latest)
	}).Should(Succeed())
}

var _ = Describe("Step readiness", func() {
	var ctx context.Context
	var ns string
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("is Loading while a step's pods run unready, Failed in a crash loop, and Running only once every model is ready", func() {
		p := createSample(ctx, ns)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseCreating))
		bindStorage(ctx, p)
		setStepDeploymentReady(ctx, p, 0, 1)

		By("the second step's pod runs, its model still loading (startup probe not passed)")
		pod := stepPod(ctx, p, 1, "loading-1", sampleNodes[1])
		running := corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [step]"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "step", Image: p.Spec.Steps[1].Image, Started: ptr.To(false),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
		stepPodStatus(ctx, pod, running)
		setStepDeploymentReady(ctx, p, 1, 0)
		Eventually(stepStatus(ctx, p, 1)).Should(And(HaveField("State", pipelinev1.StepStateLoading), HaveField("Reason", "ModelLoading"),
			HaveField("Message", ContainSubstring("pod loading-1 runs but is not ready: startup probe of step not passed yet"))))
		Expect(stepStatus(ctx, p, 0)()).To(HaveField("State", pipelinev1.StepStateReady))
		Expect(phase(ctx, p)()).To(Equal(pipelinev1.PipelinePhaseCreating))
		Expect(condition(ctx, p, pipelinev1.ConditionReady)()).To(HaveField("Status", metav1.ConditionFalse))
		Expect(condition(ctx, p, pipelinev1.ConditionAvailable)().Message).To(ContainSubstring("pod loading-1 runs but is not ready"))

		By("its container crashes and restarts: seen within the recheck interval, no other event needed")
		crashing := *running.DeepCopy()
		crashing.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container=step"}}
		crashing.ContainerStatuses[0].RestartCount = 2
		crashing.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
		stepPodStatus(ctx, pod, crashing)
		Eventually(stepStatus(ctx, p, 1), "30s").Should(And(HaveField("State", pipelinev1.StepStateFailed), HaveField("Reason", "CrashLoopBackOff")))
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseFailed))
		deg := condition(ctx, p, pipelinev1.ConditionDegraded)()
		Expect(deg).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pipelinev1.ReasonStepFailed)))
		Expect(deg.Message).To(ContainSubstring("pod loading-1, container step: CrashLoopBackOff"))
		Expect(deg.Message).To(ContainSubstring("exit code 1 (Error) after 2 restarts"))

		By("the model loads: the step is Ready and the Pipeline Running")
		ready := *running.DeepCopy()
		ready.Conditions[1] = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
		ready.ContainerStatuses[0].Started, ready.ContainerStatuses[0].Ready = ptr.To(true), true
		stepPodStatus(ctx, pod, ready)
		setStepDeploymentReady(ctx, p, 1, 1)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(stepStatus(ctx, p, 1)()).To(And(HaveField("State", pipelinev1.StepStateReady), HaveField("Message", "1 of 1 pods ready")))
	})

	It("says why the router stops: its pod's termination message names the tensor mapping the models refuse", func() {
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			withRouter(p)
			for i := range p.Spec.Steps {
				p.Spec.Steps[i].Protocol = pipelinev1.StepProtocolOpenInference
			}
			p.Spec.Steps[1].Inputs = []pipelinev1.StepTensorInput{{Name: "pixels", Step: p.Spec.Steps[0].Name, Tensor: "faces"}}
		})
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseCreating))
		bindStorage(ctx, p)
		rollOut(ctx, p)
		cfg, _ := routerConfigOf(ctx, p)
		Expect(cfg.Steps[1].Inputs).To(HaveLen(1))

		By("the router's container exits at start again after a restart, its Deployment only unavailable")
		const refusal = `the tensor mappings do not fit the models: input "pixels" of step 2 (recognize): ` +
			`output "faces" of step 1 (detect) has datatype INT64, the input is FP32`
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "router-1", Namespace: ns, Labels: resources.RouterSelector(p)},
			Spec:       corev1.PodSpec{NodeName: sampleNodes[0], Containers: []corev1.Container{{Name: "router", Image: testenv.RouterImage}}},
		}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		ended := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: refusal + "\n"}
		stepPodStatus(ctx, pod, corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "router", Image: testenv.RouterImage, RestartCount: 1,
				State: corev1.ContainerState{Terminated: ended}}}})
		Eventually(func() error {
			d := routerDeploymentOf(ctx, p)
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1}
			return k8sClient.Status().Update(ctx, d)
		}).Should(Succeed())
		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded), "30s").Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pipelinev1.ReasonRouterFailed),
			HaveField("Message", ContainSubstring("router: pod router-1, container router: "+
				"its last run ended with exit code 1 (Error) after 1 restarts: "+refusal))))
		Expect(condition(ctx, p, pipelinev1.ConditionReady)()).To(HaveField("Status", metav1.ConditionFalse))

		By("then it waits to be restarted, in a crash loop")
		stepPodStatus(ctx, pod, corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "router", Image: testenv.RouterImage, RestartCount: 3,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: ended}}}})
		Eventually(condition(ctx, p, pipelinev1.ConditionDegraded), "30s").Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pipelinev1.ReasonRouterFailed),
			HaveField("Message", ContainSubstring("router: pod router-1, container router: CrashLoopBackOff; "+
				"its last run ended with exit code 1 (Error) after 3 restarts: "+refusal))))
		Expect(phase(ctx, p)()).To(Equal(pipelinev1.PipelinePhaseFailed))

		By("the router starts once the mapping fits: the Pipeline runs")
		rollOutRouter(ctx, p)
		Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	})

	It("gives a step of the Open Inference Protocol the protocol's probes, patient for its model to load", func() {
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			s := &p.Spec.Steps[1]
			s.Protocol, s.Model, s.ModelLoadTimeoutSeconds = pipelinev1.StepProtocolOpenInference, "repository/densenet_onnx", ptr.To[int32](1200)
		})
		c := deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0]
		Expect(c.ReadinessProbe).NotTo(BeNil())
		Expect(c.ReadinessProbe.HTTPGet).To(HaveField("Path", "/v2/models/densenet_onnx/ready"))
		Expect(c.LivenessProbe.HTTPGet).To(HaveField("Path", "/v2/health/live"))
		Expect(c.StartupProbe.HTTPGet).To(HaveField("Path", "/v2/models/densenet_onnx/ready"))
		Expect(c.StartupProbe.FailureThreshold * c.StartupProbe.PeriodSeconds).To(BeEquivalentTo(1200))
		Expect(c.StartupProbe.HTTPGet.Port.IntValue()).To(Equal(int(c.Ports[0].ContainerPort)))
		Expect(deploymentOf(ctx, p, 0).Spec.Template.Spec.Containers[0].ReadinessProbe).To(BeNil(), "a step of HTTP declares none")
	})
})
