package pipeline

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// autoscalerManager is the field manager the tests write the scale subresource with, as the
// autoscaler controller does.
const autoscalerManager = "horizontal-pod-autoscaler"

// replicasOwners are the field managers that own spec.replicas of obj.
func replicasOwners(obj client.Object) []string {
	var owners []string
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]any
		Expect(json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
		if _, ok := fields["f:spec"]["f:replicas"]; ok {
			owners = append(owners, e.Manager)
		}
	}
	return owners
}

func autoscalerOf(ctx context.Context, p *pipelinev1.Pipeline, i int) *autoscalingv2.HorizontalPodAutoscaler {
	GinkgoHelper()
	return child(ctx, &autoscalingv2.HorizontalPodAutoscaler{}, p.Namespace, resources.StepObjectName(p, i))
}

// scaleStep scales the Deployment of step i through its scale subresource, as the autoscaler does.
func scaleStep(ctx context.Context, p *pipelinev1.Pipeline, i int, replicas int32) {
	GinkgoHelper()
	d := deploymentOf(ctx, p, i)
	scale := &autoscalingv1.Scale{}
	Expect(k8sClient.SubResource("scale").Get(ctx, d, scale)).To(Succeed())
	scale.Spec.Replicas = replicas
	Expect(k8sClient.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(scale), client.FieldOwner(autoscalerManager))).To(Succeed())
}

var _ = Describe("Step autoscaling and disruption budgets", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("hands a step's replicas over to its autoscaler, keeps the autoscaler's count, and takes them back", func() {
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Replicas = ptr.To[int32](2) })
		name := resources.StepObjectName(p, 1)
		Expect(replicasOwners(deploymentOf(ctx, p, 1))).To(Equal([]string{apply.FieldManager}))

		By("autoscaling the step makes its HorizontalPodAutoscaler")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Replicas = nil
			p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 6,
				TargetCPUUtilizationPercentage: ptr.To[int32](60)}
		})
		hpa := autoscalerOf(ctx, p, 1)
		Expect(hpa.Spec.ScaleTargetRef).To(Equal(autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}))
		Expect(hpa.Spec.MinReplicas).To(HaveValue(BeEquivalentTo(2)))
		Expect(hpa.Spec.MaxReplicas).To(BeEquivalentTo(6))
		Expect(hpa.Spec.Metrics).To(Equal([]autoscalingv2.MetricSpec{testenv.Utilization(corev1.ResourceCPU, 60)}))
		Expect(metav1.IsControlledBy(hpa, getPipeline(ctx, p))).To(BeTrue())
		Expect(hpa.Labels).To(HaveKeyWithValue(resources.LabelStep, "2"))
		Expect(gone(ctx, &autoscalingv2.HorizontalPodAutoscaler{}, ns, resources.StepObjectName(p, 0))).To(BeTrue(), "only the autoscaled step has one")

		By("the Deployment keeps its 2 pods while the operator's apply lets go of replicas")
		Eventually(func() []string { return replicasOwners(deploymentOf(ctx, p, 1)) }).Should(Equal([]string{apply.ReplicasHandOverManager}))
		Expect(deploymentOf(ctx, p, 1).Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))

		By("the autoscaler scales the step to 5 through the scale subresource")
		scaleStep(ctx, p, 1, 5)
		// The autoscaler reports, without a metrics API: it cannot compute a count.
		hpa = autoscalerOf(ctx, p, 1)
		hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 5, DesiredReplicas: 5,
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse,
				Reason: "FailedGetResourceMetric", Message: "no metrics returned from resource metrics API", LastTransitionTime: metav1.Now()}}}
		Expect(k8sClient.Status().Update(ctx, hpa)).To(Succeed())
		// The new pods start: 3 of 5 available is no rollout (minReplicas is 2), the Pipeline is running.
		Eventually(func() error {
			d := deploymentOf(ctx, p, 1)
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 5, UpdatedReplicas: 5,
				ReadyReplicas: 3, AvailableReplicas: 3}
			return k8sClient.Status().Update(ctx, d)
		}).Should(Succeed())
		Eventually(func() pipelinev1.PipelineStatus { return getPipeline(ctx, p).Status }).Should(And(
			HaveField("Phase", Equal(pipelinev1.PipelinePhaseRunning)),
			HaveField("Steps", HaveEach(HaveField("DeploymentState", Equal(pipelinev1.DeploymentStateAvailable)))),
			HaveField("Steps", ContainElement(And(HaveField("Replicas", HaveValue(BeEquivalentTo(5))), HaveField("ReadyReplicas", HaveValue(BeEquivalentTo(3))))))))
		rollOut(ctx, p)
		Eventually(stepStatus(ctx, p, 1)).Should(And(
			HaveField("Replicas", HaveValue(BeEquivalentTo(5))), HaveField("ReadyReplicas", HaveValue(BeEquivalentTo(5))),
			HaveField("Autoscaling", Equal(&pipelinev1.StepAutoscalingStatus{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](6),
				CurrentReplicas: ptr.To[int32](5), DesiredReplicas: ptr.To[int32](5), ScalingActive: ptr.To(false),
				Message: "FailedGetResourceMetric: no metrics returned from resource metrics API"}))))
		Expect(phase(ctx, p)()).To(Equal(pipelinev1.PipelinePhaseRunning), "no metrics API does not fail the Pipeline")

		By("further passes leave the count at 5 and write nothing")
		p = getPipeline(ctx, p)
		Consistently(func() string { return getPipeline(ctx, p).ResourceVersion }).Should(Equal(p.ResourceVersion))
		expectNoWritesOnReconcile(ctx, p)
		Expect(deploymentOf(ctx, p, 1).Spec.Replicas).To(HaveValue(BeEquivalentTo(5)))
		Expect(replicasOwners(deploymentOf(ctx, p, 1))).NotTo(ContainElement(apply.FieldManager))

		By("a change that rewrites the Deployment keeps the autoscaler's count")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Image = "nginx:1.27" })
		Eventually(func() string { return deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image }).Should(Equal("nginx:1.27"))
		Expect(deploymentOf(ctx, p, 1).Spec.Replicas).To(HaveValue(BeEquivalentTo(5)))

		By("an edited autoscaler is put back")
		hpa = autoscalerOf(ctx, p, 1)
		hpa.Spec.MaxReplicas = 99
		Expect(k8sClient.Update(ctx, hpa)).To(Succeed())
		Eventually(func() int32 { return autoscalerOf(ctx, p, 1).Spec.MaxReplicas }).Should(BeEquivalentTo(6))

		By("removing autoscaling deletes the autoscaler, and the operator sets replicas again")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Autoscaling = nil
			p.Spec.Steps[1].Replicas = ptr.To[int32](3)
		})
		Eventually(func() bool { return gone(ctx, &autoscalingv2.HorizontalPodAutoscaler{}, ns, name) }).Should(BeTrue())
		Eventually(func() *int32 { return deploymentOf(ctx, p, 1).Spec.Replicas }).Should(HaveValue(BeEquivalentTo(3)))
		Expect(replicasOwners(deploymentOf(ctx, p, 1))).To(Equal([]string{apply.FieldManager}))
		Eventually(eventNotes(ctx, p)).Should(ContainElement("Deleted: Deleted HorizontalPodAutoscaler " + name))
		rollOut(ctx, p)
		Eventually(stepStatus(ctx, p, 1)).Should(And(HaveField("Replicas", HaveValue(BeEquivalentTo(3))), HaveField("Autoscaling", BeNil())))
	})

	It("makes an autoscaled step's Deployment without replicas, and the autoscaler's count stays", func() {
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0].Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 3}
		})
		Expect(autoscalerOf(ctx, p, 0).Spec.Metrics).To(Equal([]autoscalingv2.MetricSpec{testenv.Utilization(corev1.ResourceCPU, 80)}),
			"no target: 80% CPU")
		scaleStep(ctx, p, 0, 3)
		// The create's default of one pod was the operator's; the autoscaler's scale took it over.
		Expect(replicasOwners(deploymentOf(ctx, p, 0))).To(Equal([]string{autoscalerManager}))
		rollOut(ctx, p)
		Eventually(stepStatus(ctx, p, 0)).Should(HaveField("ReadyReplicas", HaveValue(BeEquivalentTo(3))))
		p = getPipeline(ctx, p)
		Consistently(func() string { return getPipeline(ctx, p).ResourceVersion }).Should(Equal(p.ResourceVersion))
		expectNoWritesOnReconcile(ctx, p)
		Expect(deploymentOf(ctx, p, 0).Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))

		By("the Deployment's first update keeps the autoscaler's count")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Image = "nginx:1.27" })
		Eventually(func() string { return deploymentOf(ctx, p, 0).Spec.Template.Spec.Containers[0].Image }).Should(Equal("nginx:1.27"))
		Expect(deploymentOf(ctx, p, 0).Spec.Replicas).To(HaveValue(BeEquivalentTo(3)))
		Expect(replicasOwners(deploymentOf(ctx, p, 0))).To(Equal([]string{autoscalerManager}))
	})

	It("gives a step with more than one pod a disruption budget and deletes it when the step drops to one", func() {
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			// Not pinned: a budget of pods that cannot leave their node would only stall its drain.
			p.Spec.Steps[1].Location = ""
			p.Spec.Steps[1].Replicas = ptr.To[int32](2)
		})
		name := resources.StepObjectName(p, 1)
		pdb := child(ctx, &policyv1.PodDisruptionBudget{}, ns, name)
		Expect(pdb.Spec.MaxUnavailable).To(Equal(ptr.To(intstr.FromInt32(1))))
		Expect(pdb.Spec.Selector).To(Equal(&metav1.LabelSelector{MatchLabels: resources.StepSelector(p, 1)}))
		Expect(metav1.IsControlledBy(pdb, p)).To(BeTrue())
		Expect(pdb.Labels).To(HaveKeyWithValue(resources.LabelManagedBy, resources.ManagedBy))
		Expect(gone(ctx, &policyv1.PodDisruptionBudget{}, ns, resources.StepObjectName(p, 0))).To(BeTrue(), "a step of one pod has none")

		By("a converged Pipeline with a budget writes nothing")
		Consistently(func() string { return getPipeline(ctx, p).ResourceVersion }).Should(Equal(p.ResourceVersion))
		expectNoWritesOnReconcile(ctx, p)

		By("one pod: the budget goes")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Replicas = ptr.To[int32](1) })
		Eventually(func() bool { return gone(ctx, &policyv1.PodDisruptionBudget{}, ns, name) }).Should(BeTrue())
		Eventually(eventNotes(ctx, p)).Should(ContainElement("Deleted: Deleted PodDisruptionBudget " + name))

		By("two pods again, then pinned to a node: the budget comes back, then goes")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Replicas = ptr.To[int32](2) })
		Eventually(func() bool { return gone(ctx, &policyv1.PodDisruptionBudget{}, ns, name) }).Should(BeFalse())
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Location = sampleNodes[1] })
		Eventually(func() bool { return gone(ctx, &policyv1.PodDisruptionBudget{}, ns, name) }).Should(BeTrue())
	})

	DescribeTable("refuses invalid autoscaling at admission with a specific message",
		func(edit func(s *pipelinev1.Step), message string) {
			p := testenv.Sample(GinkgoT(), ns)
			p.UID = ""
			edit(&p.Spec.Steps[1])
			err := k8sClient.Create(ctx, p)
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), err.Error())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("replicas and autoscaling", func(s *pipelinev1.Step) {
			s.Replicas = ptr.To[int32](2)
			s.Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 4}
		}, "set replicas or autoscaling, not both"),
		Entry("minReplicas above maxReplicas", func(s *pipelinev1.Step) {
			s.Autoscaling = &pipelinev1.StepAutoscaling{MinReplicas: ptr.To[int32](5), MaxReplicas: 4}
		}, "autoscaling.minReplicas must not exceed autoscaling.maxReplicas"),
		Entry("maxReplicas left out", func(s *pipelinev1.Step) {
			s.Autoscaling = &pipelinev1.StepAutoscaling{}
		}, "spec.steps[1].autoscaling.maxReplicas: Required value"),
		Entry("maxReplicas above 1000", func(s *pipelinev1.Step) {
			s.Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 1001}
		}, "should be less than or equal to 1000"),
		Entry("a CPU target of 0%", func(s *pipelinev1.Step) {
			s.Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 4, TargetCPUUtilizationPercentage: ptr.To[int32](0)}
		}, "targetCPUUtilizationPercentage in body should be greater than or equal to 1"),
		Entry("a memory target of 0%", func(s *pipelinev1.Step) {
			s.Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 4, TargetMemoryUtilizationPercentage: ptr.To[int32](0)}
		}, "targetMemoryUtilizationPercentage in body should be greater than or equal to 1"),
	)
})
