package status

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// PausedStatus is the status of a paused Pipeline (see Pipeline.IsPaused): the status of the last
// pass before the pause, with Reconciled False for reason Paused. The phase, the other
// conditions and observedGeneration stay as they were: nothing was observed or applied.
func PausedStatus(p *pipelinev1.Pipeline) pipelinev1.PipelineStatus {
	st := *p.Status.DeepCopy()
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type:               pipelinev1.ConditionReconciled,
		Status:             metav1.ConditionFalse,
		Reason:             pipelinev1.ReasonPaused,
		ObservedGeneration: p.Generation,
		Message:            "Paused by " + PausedBy(p) + ": children are neither repaired nor updated until it is no longer true",
	})
	return st
}

// PausedBy names what pauses p: spec.paused, or the annotation v1beta1 spells it with, written
// on the v1 object.
func PausedBy(p *pipelinev1.Pipeline) string {
	if p.Spec.Paused != nil && *p.Spec.Paused {
		return "spec.paused"
	}
	return "the annotation " + pipelinev1.PausedAnnotation
}

// WasPaused reports whether status says that its Pipeline is paused.
func WasPaused(status pipelinev1.PipelineStatus) bool {
	c := meta.FindStatusCondition(status.Conditions, pipelinev1.ConditionReconciled)
	return c != nil && c.Reason == pipelinev1.ReasonPaused
}
