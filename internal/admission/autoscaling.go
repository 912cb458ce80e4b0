package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// autoscalingWarnings warn about an autoscaled step whose utilization target cannot be measured:
// a utilization is a percentage of the container's request, and without the request the
// autoscaler reports ScalingActive False and keeps the step at its current number of pods.
func autoscalingWarnings(name string, s *pipelinev1.Step) []string {
	a := s.Autoscaling
	if a == nil {
		return nil
	}
	var out []string
	requested := func(r corev1.ResourceName) bool {
		if s.Resources == nil {
			return false
		}
		_, ok := s.Resources.Requests[r]
		return ok
	}
	if a.EffectiveTargetCPU() > 0 && !requested(corev1.ResourceCPU) {
		out = append(out, fmt.Sprintf("step %s: autoscaling on CPU needs resources.requests.cpu: without it the autoscaler cannot measure utilization and does not scale", name))
	}
	if a.TargetMemoryUtilizationPercentage != nil && !requested(corev1.ResourceMemory) {
		out = append(out, fmt.Sprintf("step %s: autoscaling on memory needs resources.requests.memory: without it the autoscaler cannot measure utilization and does not scale", name))
	}
	return out
}

// autoscalingRemovedWarnings warn, on an update, about each step that loses its autoscaling: the
// operator deletes the autoscaler and applies replicas again (1 unless the spec says otherwise),
// so the step goes from the number of pods the autoscaler had set to that count at once.
func autoscalingRemovedWarnings(p, old *pipelinev1.Pipeline) []string {
	if old == nil {
		return nil
	}
	autoscaled := map[string]bool{}
	for i := range old.Spec.Steps {
		if old.Spec.Steps[i].Autoscaling != nil {
			autoscaled[old.Spec.Steps[i].Name] = true
		}
	}
	var out []string
	for i := range p.Spec.Steps {
		s := &p.Spec.Steps[i]
		if name := s.Name; s.Autoscaling == nil && autoscaled[name] {
			out = append(out, fmt.Sprintf("step %s: autoscaling removed: its autoscaler is deleted and the step runs "+
				"replicas (%d) pods from now on, whatever number the autoscaler had set", name, s.EffectiveReplicas()))
		}
	}
	return out
}
