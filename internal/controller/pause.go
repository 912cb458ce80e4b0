package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// isPaused reports whether p asks the operator to leave its children alone.
func isPaused(p *pipelinev1beta1.Pipeline) bool {
	return p.Annotations[pipelinev1beta1.PausedAnnotation] == "true"
}

// pausedStatus is the status of a paused Pipeline: the status of the last pass before the pause,
// with Reconciled False for reason Paused. The phase, the other conditions and
// observedGeneration stay as they were: nothing was observed or applied.
func pausedStatus(p *pipelinev1beta1.Pipeline) pipelinev1beta1.PipelineStatus {
	st := *p.Status.DeepCopy()
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type:               pipelinev1beta1.ConditionReconciled,
		Status:             metav1.ConditionFalse,
		Reason:             pipelinev1beta1.ReasonPaused,
		ObservedGeneration: p.Generation,
		Message: "Paused by the annotation " + pipelinev1beta1.PausedAnnotation +
			"=true: children are neither repaired nor updated until it is removed",
	})
	return st
}

// wasPaused reports whether status says that its Pipeline is paused.
func wasPaused(status pipelinev1beta1.PipelineStatus) bool {
	c := meta.FindStatusCondition(status.Conditions, pipelinev1beta1.ConditionReconciled)
	return c != nil && c.Reason == pipelinev1beta1.ReasonPaused
}

// reconcilePaused records that p is paused, in its status and with one event, and touches
// nothing else.
func (r *PipelineReconciler) reconcilePaused(ctx context.Context, p *pipelinev1beta1.Pipeline) error {
	before := wasPaused(p.Status)
	if err := r.updateStatus(ctx, p, pausedStatus(p)); err != nil {
		return err
	}
	if !before {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, pipelinev1beta1.ReasonPaused, "Pause",
			"Reconciliation paused by the annotation %s=true", pipelinev1beta1.PausedAnnotation)
	}
	return nil
}

// recordResumed records an event when a pass of a Pipeline that was paused made it match its spec again.
func (r *PipelineReconciler) recordResumed(p *pipelinev1beta1.Pipeline, before pipelinev1beta1.PipelineStatus) {
	if wasPaused(before) && !wasPaused(p.Status) {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "Resumed", "Resume",
			"Reconciliation resumed: the annotation %s is no longer true", pipelinev1beta1.PausedAnnotation)
	}
}
