package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestDesiredStepHPA(t *testing.T) {
	tests := []struct {
		name      string
		scaling   pipelinev1.StepAutoscaling
		min       int32
		max       int32
		metrics   []autoscalingv2.MetricSpec
		stepIndex int
	}{{
		name:    "no target: 80% CPU, at least one pod",
		scaling: pipelinev1.StepAutoscaling{MaxReplicas: 4},
		min:     1, max: 4,
		metrics: []autoscalingv2.MetricSpec{testenv.Utilization(corev1.ResourceCPU, 80)},
	}, {
		name: "CPU target and bounds",
		scaling: pipelinev1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 10,
			TargetCPUUtilizationPercentage: ptr.To[int32](60)},
		min: 2, max: 10,
		metrics: []autoscalingv2.MetricSpec{testenv.Utilization(corev1.ResourceCPU, 60)},
	}, {
		name:    "memory target only: no CPU target",
		scaling: pipelinev1.StepAutoscaling{MaxReplicas: 3, TargetMemoryUtilizationPercentage: ptr.To[int32](70)},
		min:     1, max: 3,
		metrics: []autoscalingv2.MetricSpec{testenv.Utilization(corev1.ResourceMemory, 70)},
	}, {
		name: "both targets, on the second step",
		scaling: pipelinev1.StepAutoscaling{MaxReplicas: 5, TargetCPUUtilizationPercentage: ptr.To[int32](50),
			TargetMemoryUtilizationPercentage: ptr.To[int32](90)},
		min: 1, max: 5, stepIndex: 1,
		metrics: []autoscalingv2.MetricSpec{testenv.Utilization(corev1.ResourceCPU, 50), testenv.Utilization(corev1.ResourceMemory, 90)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "vision")
			scaling := tt.scaling
			p.Spec.Steps[tt.stepIndex].Autoscaling = &scaling
			hpa := testenv.Typed[autoscalingv2.HorizontalPodAutoscaler](t, StepHPA(p, tt.stepIndex))
			name := StepObjectName(p, tt.stepIndex)
			if hpa.Name != name || hpa.Namespace != "vision" {
				t.Errorf("name %s/%s, want vision/%s", hpa.Namespace, hpa.Name, name)
			}
			want := autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
				MinReplicas:    ptr.To(tt.min), MaxReplicas: tt.max, Metrics: tt.metrics,
			}
			if diff := cmp.Diff(want, hpa.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(StepLabels(p, tt.stepIndex), hpa.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if len(hpa.OwnerReferences) != 1 || hpa.OwnerReferences[0].UID != p.UID || !ptr.Deref(hpa.OwnerReferences[0].Controller, false) {
				t.Errorf("owner references %+v, want the Pipeline as controller", hpa.OwnerReferences)
			}
		})
	}
}

func TestDeploymentReplicasUnderAutoscaling(t *testing.T) {
	p := testenv.Sample(t, "vision")
	p.Spec.Steps[1].Replicas = ptr.To[int32](3)
	if d := typedDeployment(t, p, 1); d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Fatalf("replicas %v, want 3 for a step without autoscaling", d.Spec.Replicas)
	}
	p.Spec.Steps[1].Replicas = nil
	p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 5}
	if d := typedDeployment(t, p, 1); d.Spec.Replicas != nil {
		t.Errorf("replicas %d set for an autoscaled step: the autoscaler owns them", *d.Spec.Replicas)
	}
	if d := typedDeployment(t, p, 0); d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("replicas %v of the other step, want 1", d.Spec.Replicas)
	}
}

func TestDesiredStepPDB(t *testing.T) {
	tests := []struct {
		name  string
		step  pipelinev1.Step
		needs bool
	}{
		{name: "one pod: no budget", step: pipelinev1.Step{}},
		{name: "replicas 1: no budget", step: pipelinev1.Step{Replicas: ptr.To[int32](1)}},
		{name: "replicas 2", step: pipelinev1.Step{Replicas: ptr.To[int32](2)}, needs: true},
		{name: "autoscaled from 1: no budget", step: pipelinev1.Step{Autoscaling: &pipelinev1.StepAutoscaling{MaxReplicas: 9}}},
		{name: "autoscaled from 2", step: pipelinev1.Step{
			Autoscaling: &pipelinev1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 9}}, needs: true},
		{name: "replicas 2 pinned to a node: no budget, a drain could never proceed", step: pipelinev1.Step{
			Replicas: ptr.To[int32](2), Location: "xx-test-node239"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "vision")
			p.Spec.Steps[1].Replicas, p.Spec.Steps[1].Autoscaling = tt.step.Replicas, tt.step.Autoscaling
			p.Spec.Steps[1].Location = tt.step.Location
			if got := NeedsDisruptionBudget(p, 1); got != tt.needs {
				t.Fatalf("needsDisruptionBudget = %v, want %v", got, tt.needs)
			}
			if NeedsDisruptionBudget(p, 0) {
				t.Errorf("the first step (one pod) needs a budget")
			}
			pdb := testenv.Typed[policyv1.PodDisruptionBudget](t, StepPDB(p, 1))
			want := policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable:             ptr.To(intstr.FromInt32(1)),
				Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{LabelPipeline: p.Name, LabelComponent: "step-2"}},
				UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
			}
			if diff := cmp.Diff(want, pdb.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if pdb.Name != StepObjectName(p, 1) || pdb.Labels[LabelStep] != "2" || len(pdb.OwnerReferences) != 1 {
				t.Errorf("metadata %+v", pdb.ObjectMeta)
			}
		})
	}
}

func typedDeployment(t *testing.T, p *pipelinev1.Pipeline, i int) *appsv1.Deployment {
	t.Helper()
	return testenv.Typed[appsv1.Deployment](t, StepDeployment(p, i, "", "", ""))
}
