package status

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// counts is the status of an autoscaler with these bounds and counts: every number is written,
// 0 included.
func counts(minReplicas, maxReplicas, current, desired int32) *pipelinev1.StepAutoscalingStatus {
	return &pipelinev1.StepAutoscalingStatus{MinReplicas: ptr.To(minReplicas), MaxReplicas: ptr.To(maxReplicas),
		CurrentReplicas: ptr.To(current), DesiredReplicas: ptr.To(desired)}
}

// withScaling is as with the autoscaler's ScalingActive condition and message.
func withScaling(as *pipelinev1.StepAutoscalingStatus, active bool, message string) *pipelinev1.StepAutoscalingStatus {
	as.ScalingActive, as.Message = ptr.To(active), message
	return as
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
		scaling  *pipelinev1.StepAutoscaling
		d        *appsv1.Deployment
		hpa      *autoscalingv2.HorizontalPodAutoscaler
		replicas int32
		want     *pipelinev1.StepAutoscalingStatus
	}{{
		name: "not autoscaled: spec replicas, no block", d: scaled(7), replicas: 1,
	}, {
		name:    "nothing exists yet: minReplicas",
		scaling: &pipelinev1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 6}, replicas: 2,
		want: counts(2, 6, 0, 0),
	}, {
		name:    "autoscaler has not reported: the Deployment's count",
		scaling: &pipelinev1.StepAutoscaling{MaxReplicas: 6}, d: scaled(3), hpa: hpa(0, 0), replicas: 3,
		want: counts(1, 6, 0, 0),
	}, {
		name:    "the autoscaler's desired count",
		scaling: &pipelinev1.StepAutoscaling{MaxReplicas: 6}, d: scaled(3), replicas: 5,
		hpa: hpa(3, 5, autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue,
			Reason: "ValidMetricFound", Message: "the HPA was able to successfully calculate a replica count"}),
		want: withScaling(counts(1, 6, 3, 5), true, ""),
	}, {
		name:    "no metrics: reported, with the autoscaler's reason",
		scaling: &pipelinev1.StepAutoscaling{MaxReplicas: 6}, d: scaled(2), replicas: 2,
		hpa: hpa(2, 0, autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse,
			Reason: "FailedGetResourceMetric", Message: "no metrics returned from resource metrics API"}),
		want: withScaling(counts(1, 6, 2, 0), false, "FailedGetResourceMetric: no metrics returned from resource metrics API"),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "vision")
			p.Spec.Steps[1].Autoscaling = tt.scaling
			st := pipelinev1.StepStatus{Replicas: ptr.To(resources.StepReplicas(p, 1))}
			scalingStatus(p, 1, &st, tt.d, tt.hpa)
			if st.Replicas == nil || *st.Replicas != tt.replicas {
				t.Errorf("replicas = %v, want %d", ptr.Deref(st.Replicas, -1), tt.replicas)
			}
			if diff := cmp.Diff(tt.want, st.Autoscaling); diff != "" {
				t.Errorf("autoscaling (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScalingInactiveDoesNotFailThePipeline(t *testing.T) {
	p := testenv.Sample(t, "vision")
	p.Generation = 2
	p.Spec.Steps[1].Replicas = nil
	p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 4}
	obs := convergedWorld()
	obs.Autoscalers = make([]*autoscalingv2.HorizontalPodAutoscaler, 2)
	obs.Autoscalers[1] = &autoscalingv2.HorizontalPodAutoscaler{Status: autoscalingv2.HorizontalPodAutoscalerStatus{
		CurrentReplicas: 1, Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScalingActive,
			Status: corev1.ConditionFalse, Reason: "FailedGetResourceMetric", Message: "unable to get metrics for resource cpu"}}}}
	st := Compute(p, obs)
	if st.Phase != pipelinev1.PipelinePhaseRunning {
		t.Errorf("phase %s, want Running", st.Phase)
	}
	as := st.Steps[1].Autoscaling
	if as == nil || ptr.Deref(as.ScalingActive, true) || as.Message == "" {
		t.Errorf("autoscaling status %+v, want scalingActive false with the reason", as)
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
		want       pipelinev1.DeploymentState
	}{
		{name: "scaling up from 2 to 5, 2 available", autoscaled: true, d: deployment(5, 5, 2, 5), want: pipelinev1.DeploymentStateAvailable},
		{name: "the same without autoscaling is progressing", d: deployment(5, 5, 2, 5), want: pipelinev1.DeploymentStateProgressing},
		{name: "fewer than minReplicas available", autoscaled: true, d: deployment(5, 5, 1, 5), want: pipelinev1.DeploymentStateProgressing},
		{name: "a template rollout with old pods left", autoscaled: true, d: deployment(5, 3, 4, 6), want: pipelinev1.DeploymentStateProgressing},
		{name: "new, below minReplicas until the autoscaler raises it", autoscaled: true, d: deployment(1, 1, 1, 1), want: pipelinev1.DeploymentStateProgressing},
		{name: "scaled to zero by hand", autoscaled: true, d: deployment(0, 0, 0, 0), want: pipelinev1.DeploymentStateProgressing},
		{name: "at minReplicas", autoscaled: true, d: deployment(2, 2, 2, 2), want: pipelinev1.DeploymentStateAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "vision")
			if tt.autoscaled {
				p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 8}
			}
			before := *tt.d.Spec.Replicas
			got, detail := stepDeploymentState(p, 1, tt.d)
			if got != tt.want {
				t.Errorf("state %s (%s), want %s", got, detail, tt.want)
			}
			if *tt.d.Spec.Replicas != before {
				t.Errorf("the observed Deployment's replicas changed to %d", *tt.d.Spec.Replicas)
			}
		})
	}
}
