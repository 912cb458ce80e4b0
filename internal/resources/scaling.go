package resources

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// Autoscaling is the autoscaling of step i, nil when the step has a fixed number of pods.
func Autoscaling(p *pipelinev1.Pipeline, i int) *pipelinev1.StepAutoscaling {
	return p.Spec.Steps[i].Autoscaling
}

// stepMinReplicas is the fewest pods step i runs with: autoscaling.minReplicas for an
// autoscaled step, else its replicas.
func stepMinReplicas(p *pipelinev1.Pipeline, i int) int32 {
	if a := Autoscaling(p, i); a != nil {
		return a.EffectiveMinReplicas()
	}
	return StepReplicas(p, i)
}

// NeedsDisruptionBudget reports whether the spec lets step i have a PodDisruptionBudget (the
// reconciler also asks that two nodes can hold its pods): a step that always
// runs more than one pod, and whose pods may run on other nodes, keeps serving while a node is
// drained, one pod at a time. A budget for a single pod would either block every drain or
// protect nothing; nor does one help a step pinned to its node by location: the pod a drain
// evicts can only come back on the node being drained, so the budget would stall the drain for
// ever without keeping the step up.
func NeedsDisruptionBudget(p *pipelinev1.Pipeline, i int) bool {
	return stepMinReplicas(p, i) > 1 && p.Spec.Steps[i].Location == ""
}

// StepHPA is the HorizontalPodAutoscaler of step i: it scales the step's Deployment
// between minReplicas and maxReplicas on the utilization targets of spec autoscaling. It
// must only be called for an autoscaled step.
func StepHPA(p *pipelinev1.Pipeline, i int) *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration {
	a := Autoscaling(p, i)
	spec := autoscalingv2ac.HorizontalPodAutoscalerSpec().
		WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().
			WithAPIVersion("apps/v1").
			WithKind("Deployment").
			WithName(StepObjectName(p, i))).
		WithMinReplicas(a.EffectiveMinReplicas()).
		WithMaxReplicas(a.MaxReplicas)
	if cpu := a.EffectiveTargetCPU(); cpu > 0 {
		spec.WithMetrics(utilizationMetric(corev1.ResourceCPU, cpu))
	}
	if a.TargetMemoryUtilizationPercentage != nil {
		spec.WithMetrics(utilizationMetric(corev1.ResourceMemory, *a.TargetMemoryUtilizationPercentage))
	}
	return autoscalingv2ac.HorizontalPodAutoscaler(StepObjectName(p, i), p.Namespace).
		WithLabels(StepLabels(p, i)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(spec)
}

// utilizationMetric is a target of average utilization of resource, in percent of the pods'
// requests.
func utilizationMetric(resource corev1.ResourceName, percent int32) *autoscalingv2ac.MetricSpecApplyConfiguration {
	return autoscalingv2ac.MetricSpec().
		WithType(autoscalingv2.ResourceMetricSourceType).
		WithResource(autoscalingv2ac.ResourceMetricSource().
			WithName(resource).
			WithTarget(autoscalingv2ac.MetricTarget().
				WithType(autoscalingv2.UtilizationMetricType).
				WithAverageUtilization(percent)))
}

// StepPDB is the PodDisruptionBudget of step i: voluntary disruptions (node drains)
// take at most one of the step's pods at a time. It must only be called for a step that
// NeedsDisruptionBudget.
func StepPDB(p *pipelinev1.Pipeline, i int) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(StepObjectName(p, i), p.Namespace).
		WithLabels(StepLabels(p, i)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(StepSelector(p, i))).
			// A pod that is not ready (a replacement that cannot start, a crash loop) serves
			// nothing: evicting it must not wait for the budget, or a drain stalls on it.
			WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow))
}
