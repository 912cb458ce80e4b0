package pipeline

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
)

// reconcilePaused records that p is paused, in its status and with one event, and touches
// nothing else. What its ModelStorageClass grants (grant, nil for other storage) is still
// recorded: a revocation's grace runs while the Pipeline is paused.
func (r *Reconciler) reconcilePaused(ctx context.Context, p *pipelinev1.Pipeline, grant *classGrant) error {
	before := status.WasPaused(p.Status)
	st := status.PausedStatus(p)
	if grant != nil {
		status.SetStorageAuthorized(&st, p, &grant.access)
	}
	if err := r.updateStatus(ctx, p, st); err != nil {
		return err
	}
	if !before {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, pipelinev1.ReasonPaused, "Pause",
			"Reconciliation paused by %s", status.PausedBy(p))
	}
	return nil
}

// recordResumed records an event when a pass of a Pipeline that was paused made it match its spec again.
func (r *Reconciler) recordResumed(p *pipelinev1.Pipeline, before pipelinev1.PipelineStatus) {
	if status.WasPaused(before) && !status.WasPaused(p.Status) {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "Resumed", "Resume",
			"Reconciliation resumed: spec.paused is no longer true")
	}
}
