package status

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// setHealth sets the conditions that generic tools read from the phase and the conditions
// Compute set before: Ready (kubectl wait), Reconciling and Stalled (kstatus: InProgress and
// Failed; neither True is Current). A Degraded notice (a cordoned node whose pods still serve)
// leaves the Pipeline Ready and not Stalled.
func setHealth(st *pipelinev1.PipelineStatus, gen int64) {
	degraded := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionDegraded)
	available := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionAvailable)
	progressing := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionProgressing)

	ready := metav1.Condition{Type: pipelinev1.ConditionReady, ObservedGeneration: gen}
	reconciling := metav1.Condition{Type: pipelinev1.ConditionReconciling, ObservedGeneration: gen,
		Status: metav1.ConditionFalse, Reason: progressing.Reason, Message: progressing.Message}
	stalled := metav1.Condition{Type: pipelinev1.ConditionStalled, ObservedGeneration: gen,
		Status: metav1.ConditionFalse, Reason: pipelinev1.ReasonAsExpected, Message: "Nothing needs a person"}
	switch st.Phase {
	case pipelinev1.PipelinePhaseRunning:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, pipelinev1.ReasonRunning, available.Message
	case pipelinev1.PipelinePhaseFailed:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, degraded.Reason, degraded.Message
		stalled.Status, stalled.Reason, stalled.Message = metav1.ConditionTrue, degraded.Reason, degraded.Message
	default:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, available.Reason, available.Message
		reconciling.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	meta.SetStatusCondition(&st.Conditions, reconciling)
	meta.SetStatusCondition(&st.Conditions, stalled)
}
