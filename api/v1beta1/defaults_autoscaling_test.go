package v1beta1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func int32p(v int32) *int32 { return &v }

func TestDefaultAutoscaledStep(t *testing.T) {
	tests := []struct {
		name         string
		step         Step
		wantReplicas *int32
		want         *StepAutoscaling
	}{{
		name:         "no autoscaling: replicas 1",
		step:         Step{},
		wantReplicas: int32p(1),
	}, {
		name: "autoscaling: no replicas, minReplicas 1, 80% CPU",
		step: Step{Autoscaling: &StepAutoscaling{MaxReplicas: 4}},
		want: &StepAutoscaling{MinReplicas: int32p(1), MaxReplicas: 4, TargetCPUUtilizationPercentage: int32p(80)},
	}, {
		name: "the replicas 1 stored before autoscaling goes",
		step: Step{Replicas: int32p(1), Autoscaling: &StepAutoscaling{MinReplicas: int32p(2), MaxReplicas: 4}},
		want: &StepAutoscaling{MinReplicas: int32p(2), MaxReplicas: 4, TargetCPUUtilizationPercentage: int32p(80)},
	}, {
		name:         "other replicas stay, for validation to refuse",
		step:         Step{Replicas: int32p(3), Autoscaling: &StepAutoscaling{MaxReplicas: 4}},
		wantReplicas: int32p(3),
		want:         &StepAutoscaling{MinReplicas: int32p(1), MaxReplicas: 4, TargetCPUUtilizationPercentage: int32p(80)},
	}, {
		name: "a memory target alone gets no CPU target",
		step: Step{Autoscaling: &StepAutoscaling{MaxReplicas: 4, TargetMemoryUtilizationPercentage: int32p(70)}},
		want: &StepAutoscaling{MinReplicas: int32p(1), MaxReplicas: 4, TargetMemoryUtilizationPercentage: int32p(70)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Pipeline{Spec: PipelineSpec{Steps: []Step{tt.step}}}
			p.Default()
			got := p.Spec.Steps[0]
			if diff := cmp.Diff(tt.wantReplicas, got.Replicas); diff != "" {
				t.Errorf("replicas (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got.Autoscaling); diff != "" {
				t.Errorf("autoscaling (-want +got):\n%s", diff)
			}
		})
	}
}
