package status

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// scalingStatus completes the status of step i with its autoscaler: replicas becomes the count
// the autoscaler asks for (the Deployment's until it has reported), and autoscaling shows the
// autoscaler's bounds and counts. An autoscaler that cannot compute a count (ScalingActive
// False: no metrics API, no resource requests) is reported here only: the step keeps its pods,
// and the Pipeline is not failed for it.
func scalingStatus(p *pipelinev1.Pipeline, i int, st *pipelinev1.StepStatus, d *appsv1.Deployment, hpa *autoscalingv2.HorizontalPodAutoscaler) {
	a := resources.Autoscaling(p, i)
	if a == nil {
		return
	}
	as := &pipelinev1.StepAutoscalingStatus{MinReplicas: ptr.To(a.EffectiveMinReplicas()), MaxReplicas: ptr.To(a.MaxReplicas),
		CurrentReplicas: ptr.To[int32](0), DesiredReplicas: ptr.To[int32](0)}
	if d != nil && d.Spec.Replicas != nil {
		st.Replicas = ptr.To(*d.Spec.Replicas)
	} else {
		st.Replicas = ptr.To(a.EffectiveMinReplicas())
	}
	if hpa != nil {
		as.CurrentReplicas, as.DesiredReplicas = ptr.To(hpa.Status.CurrentReplicas), ptr.To(hpa.Status.DesiredReplicas)
		if hpa.Status.DesiredReplicas > 0 {
			st.Replicas = ptr.To(hpa.Status.DesiredReplicas)
		}
		for _, c := range hpa.Status.Conditions {
			if c.Type != autoscalingv2.ScalingActive {
				continue
			}
			as.ScalingActive = ptr.To(c.Status == corev1.ConditionTrue)
			if c.Status == corev1.ConditionFalse {
				as.Message = problem.Truncate(fmt.Sprintf("%s: %s", c.Reason, c.Message), 1024)
			}
		}
	}
	st.Autoscaling = as
}

// stepDeploymentState classifies the Deployment of step i. An autoscaled step is available
// once minReplicas of its pods (at least one) run the current template: a scale-up by the
// autoscaler is not a rollout, and must not turn the Pipeline back to Creating (nor hold an
// upgrade of the operator) while the new pods start.
func stepDeploymentState(p *pipelinev1.Pipeline, i int, d *appsv1.Deployment) (pipelinev1.DeploymentState, string) {
	a := resources.Autoscaling(p, i)
	if a == nil || d.Spec.Replicas == nil {
		return deploymentState(d)
	}
	// At least one pod: a step scaled to zero by hand (the autoscaler then stands still) serves
	// nothing. A Deployment that has fewer than minReplicas because the autoscaler has not
	// raised it yet (a new step starts at one pod) waits for minReplicas.
	floor := max(1, a.EffectiveMinReplicas())
	scaled := *d
	scaled.Spec.Replicas = &floor
	return deploymentState(&scaled)
}
