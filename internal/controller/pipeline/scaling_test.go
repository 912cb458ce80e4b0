package pipeline

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

func TestAutoscalerChanged(t *testing.T) {
	base := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Generation: 1, Labels: map[string]string{resources.LabelStep: "1"}},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 2,
			Conditions: []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue, Reason: "ValidMetricFound"}}},
	}
	tests := []struct {
		name string
		edit func(h *autoscalingv2.HorizontalPodAutoscaler)
		want bool
	}{
		{name: "a new metric reading", edit: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType}}
			h.Status.LastScaleTime = ptr.To(metav1.Now())
		}},
		{name: "a new desired count", edit: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Status.DesiredReplicas = 4 }, want: true},
		{name: "a new current count", edit: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Status.CurrentReplicas = 3 }, want: true},
		{name: "scaling no longer active", edit: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Status.Conditions[0].Status, h.Status.Conditions[0].Reason = corev1.ConditionFalse, "FailedGetResourceMetric"
		}, want: true},
		// Before Kubernetes 1.37 the generation of an autoscaler does not follow its spec.
		{name: "a spec edit", edit: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MaxReplicas = 99 }, want: true},
		{name: "a label edit", edit: func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Labels = nil }, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := base.DeepCopy()
			tt.edit(n)
			if got := autoscalerChanged().Update(event.UpdateEvent{ObjectOld: base, ObjectNew: n}); got != tt.want {
				t.Errorf("passed = %v, want %v", got, tt.want)
			}
		})
	}
}
