package controller

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

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

func utilization(r corev1.ResourceName, percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: r, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(percent)}}}
}

func TestDesiredStepHPA(t *testing.T) {
	tests := []struct {
		name      string
		scaling   pipelinev1beta1.StepAutoscaling
		min       int32
		max       int32
		metrics   []autoscalingv2.MetricSpec
		stepIndex int
	}{{
		name:    "no target: 80% CPU, at least one pod",
		scaling: pipelinev1beta1.StepAutoscaling{MaxReplicas: 4},
		min:     1, max: 4,
		metrics: []autoscalingv2.MetricSpec{utilization(corev1.ResourceCPU, 80)},
	}, {
		name: "CPU target and bounds",
		scaling: pipelinev1beta1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 10,
			TargetCPUUtilizationPercentage: ptr.To[int32](60)},
		min: 2, max: 10,
		metrics: []autoscalingv2.MetricSpec{utilization(corev1.ResourceCPU, 60)},
	}, {
		name:    "memory target only: no CPU target",
		scaling: pipelinev1beta1.StepAutoscaling{MaxReplicas: 3, TargetMemoryUtilizationPercentage: ptr.To[int32](70)},
		min:     1, max: 3,
		metrics: []autoscalingv2.MetricSpec{utilization(corev1.ResourceMemory, 70)},
	}, {
		name: "both targets, on the second step",
		scaling: pipelinev1beta1.StepAutoscaling{MaxReplicas: 5, TargetCPUUtilizationPercentage: ptr.To[int32](50),
			TargetMemoryUtilizationPercentage: ptr.To[int32](90)},
		min: 1, max: 5, stepIndex: 1,
		metrics: []autoscalingv2.MetricSpec{utilization(corev1.ResourceCPU, 50), utilization(corev1.ResourceMemory, 90)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadSample(t, "vision")
			scaling := tt.scaling
			p.Spec.Steps[tt.stepIndex].Autoscaling = &scaling
			hpa := typed[autoscalingv2.HorizontalPodAutoscaler](t, desiredStepHPA(p, tt.stepIndex))
			name := stepObjectName(p, tt.stepIndex)
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
			if diff := cmp.Diff(stepLabels(p, tt.stepIndex), hpa.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if len(hpa.OwnerReferences) != 1 || hpa.OwnerReferences[0].UID != p.UID || !ptr.Deref(hpa.OwnerReferences[0].Controller, false) {
				t.Errorf("owner references %+v, want the Pipeline as controller", hpa.OwnerReferences)
			}
		})
	}
}

func TestDeploymentReplicasUnderAutoscaling(t *testing.T) {
	p := loadSample(t, "vision")
	p.Spec.Steps[1].Replicas = ptr.To[int32](3)
	if d := typedDeployment(t, p, 1); d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Fatalf("replicas %v, want 3 for a step without autoscaling", d.Spec.Replicas)
	}
	p.Spec.Steps[1].Replicas = nil
	p.Spec.Steps[1].Autoscaling = &pipelinev1beta1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 5}
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
		step  pipelinev1beta1.Step
		needs bool
	}{
		{name: "one pod: no budget", step: pipelinev1beta1.Step{}},
		{name: "replicas 1: no budget", step: pipelinev1beta1.Step{Replicas: ptr.To[int32](1)}},
		{name: "replicas 2", step: pipelinev1beta1.Step{Replicas: ptr.To[int32](2)}, needs: true},
		{name: "autoscaled from 1: no budget", step: pipelinev1beta1.Step{Autoscaling: &pipelinev1beta1.StepAutoscaling{MaxReplicas: 9}}},
		{name: "autoscaled from 2", step: pipelinev1beta1.Step{
			Autoscaling: &pipelinev1beta1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 9}}, needs: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadSample(t, "vision")
			p.Spec.Steps[1].Replicas, p.Spec.Steps[1].Autoscaling = tt.step.Replicas, tt.step.Autoscaling
			if got := needsDisruptionBudget(p, 1); got != tt.needs {
				t.Fatalf("needsDisruptionBudget = %v, want %v", got, tt.needs)
			}
			if needsDisruptionBudget(p, 0) {
				t.Errorf("the first step (one pod) needs a budget")
			}
			pdb := typed[policyv1.PodDisruptionBudget](t, desiredStepPDB(p, 1))
			want := policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{LabelPipeline: p.Name, labelComponent: "step-2"}},
			}
			if diff := cmp.Diff(want, pdb.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if pdb.Name != stepObjectName(p, 1) || pdb.Labels[LabelStep] != "2" || len(pdb.OwnerReferences) != 1 {
				t.Errorf("metadata %+v", pdb.ObjectMeta)
			}
		})
	}
}

func typedDeployment(t *testing.T, p *pipelinev1beta1.Pipeline, i int) *appsv1.Deployment {
	t.Helper()
	return typed[appsv1.Deployment](t, desiredStepDeployment(p, i, ""))
}

func TestScalingStatus(t *testing.T) {
	scaled := func(replicas int32) *appsv1.Deployment {
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)}}
	}
	hpa := func(current, desired int32, conds ...autoscalingv2.HorizontalPodAutoscalerCondition) *autoscalingv2.HorizontalPodAutoscaler {
		return &autoscalingv2.HorizontalPodAutoscaler{Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			CurrentReplicas: current, DesiredReplicas: desired, Conditions: conds}}
	}
	tests := []struct {
		name     string
		scaling  *pipelinev1beta1.StepAutoscaling
		d        *appsv1.Deployment
		hpa      *autoscalingv2.HorizontalPodAutoscaler
		replicas int32
		want     *pipelinev1beta1.StepAutoscalingStatus
	}{{
		name: "not autoscaled: spec replicas, no block", d: scaled(7), replicas: 1,
	}, {
		name:    "nothing exists yet: minReplicas",
		scaling: &pipelinev1beta1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 6}, replicas: 2,
		want: &pipelinev1beta1.StepAutoscalingStatus{MinReplicas: 2, MaxReplicas: 6},
	}, {
		name:    "autoscaler has not reported: the Deployment's count",
		scaling: &pipelinev1beta1.StepAutoscaling{MaxReplicas: 6}, d: scaled(3), hpa: hpa(0, 0), replicas: 3,
		want: &pipelinev1beta1.StepAutoscalingStatus{MinReplicas: 1, MaxReplicas: 6},
	}, {
		name:    "the autoscaler's desired count",
		scaling: &pipelinev1beta1.StepAutoscaling{MaxReplicas: 6}, d: scaled(3), replicas: 5,
		hpa: hpa(3, 5, autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue,
			Reason: "ValidMetricFound", Message: "the HPA was able to successfully calculate a replica count"}),
		want: &pipelinev1beta1.StepAutoscalingStatus{MinReplicas: 1, MaxReplicas: 6, CurrentReplicas: 3, DesiredReplicas: 5,
			ScalingActive: ptr.To(true)},
	}, {
		name:    "no metrics: reported, with the autoscaler's reason",
		scaling: &pipelinev1beta1.StepAutoscaling{MaxReplicas: 6}, d: scaled(2), replicas: 2,
		hpa: hpa(2, 0, autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse,
			Reason: "FailedGetResourceMetric", Message: "no metrics returned from resource metrics API"}),
		want: &pipelinev1beta1.StepAutoscalingStatus{MinReplicas: 1, MaxReplicas: 6, CurrentReplicas: 2, ScalingActive: ptr.To(false),
			Message: "FailedGetResourceMetric: no metrics returned from resource metrics API"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadSample(t, "vision")
			p.Spec.Steps[1].Autoscaling = tt.scaling
			st := pipelinev1beta1.StepStatus{Replicas: stepReplicas(p, 1)}
			scalingStatus(p, 1, &st, tt.d, tt.hpa)
			if st.Replicas != tt.replicas {
				t.Errorf("replicas = %d, want %d", st.Replicas, tt.replicas)
			}
			if diff := cmp.Diff(tt.want, st.Autoscaling); diff != "" {
				t.Errorf("autoscaling (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScalingInactiveDoesNotFailThePipeline(t *testing.T) {
	p := loadSample(t, "vision")
	p.Generation = 2
	p.Spec.Steps[1].Replicas = nil
	p.Spec.Steps[1].Autoscaling = &pipelinev1beta1.StepAutoscaling{MaxReplicas: 4}
	obs := convergedWorld()
	obs.autoscalers = make([]*autoscalingv2.HorizontalPodAutoscaler, 2)
	obs.autoscalers[1] = &autoscalingv2.HorizontalPodAutoscaler{Status: autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: 1, Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScalingActive,
			Status: corev1.ConditionFalse, Reason: "FailedGetResourceMetric", Message: "unable to get metrics for resource cpu"}}}}
	st := computeStatus(p, obs)
	if st.Phase != pipelinev1beta1.PipelinePhaseRunning {
		t.Errorf("phase %s, want running", st.Phase)
	}
	as := st.DetailPhase.StepsPhase[1].Autoscaling
	if as == nil || ptr.Deref(as.ScalingActive, true) || as.Message == "" {
		t.Errorf("autoscaling status %+v, want scalingActive false with the reason", as)
	}
}

func TestOwnsReplicas(t *testing.T) {
	entry := func(manager, subresource, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Subresource: subresource, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	withReplicas := `{"f:spec":{"f:replicas":{},"f:template":{}}}`
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{name: "the operator's apply owns it", entries: []metav1.ManagedFieldsEntry{entry(FieldManager, "", withReplicas)}, want: true},
		{name: "the operator owns other fields", entries: []metav1.ManagedFieldsEntry{entry(FieldManager, "", `{"f:spec":{"f:template":{}}}`)}},
		{name: "the autoscaler owns it, through scale", entries: []metav1.ManagedFieldsEntry{
			entry(FieldManager, "", `{"f:spec":{"f:template":{}}}`), entry("kube-controller-manager", "scale", withReplicas)}},
		{name: "someone else owns it", entries: []metav1.ManagedFieldsEntry{entry("kubectl", "", withReplicas)}},
		{name: "no managed fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ownsReplicas(tt.entries, FieldManager); got != tt.want {
				t.Errorf("ownsReplicas = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAutoscaledStepAvailableDuringScaleUp(t *testing.T) {
	deployment := func(replicas, updated, available, total int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: total, UpdatedReplicas: updated, AvailableReplicas: available}}
	}
	tests := []struct {
		name       string
		autoscaled bool
		d          *appsv1.Deployment
		want       pipelinev1beta1.DeploymentPhase
	}{
		{name: "scaling up from 2 to 5, 2 available", autoscaled: true, d: deployment(5, 5, 2, 5), want: pipelinev1beta1.DeploymentPhaseAvailable},
		{name: "the same without autoscaling is progressing", d: deployment(5, 5, 2, 5), want: pipelinev1beta1.DeploymentPhaseProgressing},
		{name: "fewer than minReplicas available", autoscaled: true, d: deployment(5, 5, 1, 5), want: pipelinev1beta1.DeploymentPhaseProgressing},
		{name: "a template rollout with old pods left", autoscaled: true, d: deployment(5, 3, 4, 6), want: pipelinev1beta1.DeploymentPhaseProgressing},
		{name: "scaled below minReplicas, all available", autoscaled: true, d: deployment(1, 1, 1, 1), want: pipelinev1beta1.DeploymentPhaseAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadSample(t, "vision")
			if tt.autoscaled {
				p.Spec.Steps[1].Autoscaling = &pipelinev1beta1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 8}
			}
			before := *tt.d.Spec.Replicas
			got, detail := stepDeploymentPhase(p, 1, tt.d)
			if got != tt.want {
				t.Errorf("phase %s (%s), want %s", got, detail, tt.want)
			}
			if *tt.d.Spec.Replicas != before {
				t.Errorf("the observed Deployment's replicas changed to %d", *tt.d.Spec.Replicas)
			}
		})
	}
}
