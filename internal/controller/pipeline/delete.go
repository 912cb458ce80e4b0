package pipeline

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
)

// reconcileDelete removes the PersistentVolumes of a Pipeline that is being deleted, then lets
// it go. The garbage collector removes the namespaced children through their owner references.
func (r *Reconciler) reconcileDelete(ctx context.Context, p *pipelinev1.Pipeline) error {
	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		return nil
	}
	st := p.Status.DeepCopy()
	st.Phase = pipelinev1.PipelinePhaseDeleting
	if err := r.updateStatus(ctx, p, *st); err != nil {
		return err
	}

	deleted, err := r.deleteVolumes(ctx, client.ObjectKeyFromObject(p), p)
	if err != nil {
		// The deletion is retried with back-off; the status says why the Pipeline stays.
		err = fmt.Errorf("%w: the Pipeline keeps its finalizer %s until its volumes are deleted; "+
			"remove the cause, or delete the volumes yourself", err, Finalizer)
		st := p.Status.DeepCopy()
		status.SetReconciled(st, p.Generation, err)
		if serr := r.updateStatus(ctx, p, *st); serr != nil && !apierrors.IsConflict(serr) {
			err = errors.Join(err, serr)
		}
		return err
	}

	if err := r.patchLocked(ctx, p, func(p *pipelinev1.Pipeline) { controllerutil.RemoveFinalizer(p, Finalizer) }); err != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	r.Metrics.ForgetPipeline(client.ObjectKeyFromObject(p))
	log.FromContext(ctx).Info("Pipeline children released", "persistentVolumes", deleted)
	return nil
}

// deleteOrphanedVolumes deletes the PersistentVolumes of a Pipeline that is gone without its
// finalizer having released them: removed by hand, or deleted by the apiserver in the same
// moment as the finalizer was added (a delete that read the Pipeline before the finalizer was
// there), while a pass that had not seen the delete yet made its volume. A volume is
// cluster-scoped and carries no owner reference, so nothing else would ever delete it. The
// Pipeline is looked up in the apiserver first: one made again under the same name keeps its
// volume.
func (r *Reconciler) deleteOrphanedVolumes(ctx context.Context, key types.NamespacedName) error {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(pipelinev1.GroupVersion.WithKind("Pipeline"))
	if err := r.APIReader.Get(ctx, key, m); !apierrors.IsNotFound(err) {
		return client.IgnoreNotFound(err)
	}
	if _, err := r.deleteVolumes(ctx, key, nil); err != nil {
		return fmt.Errorf("the Pipeline %s is gone: %w", key, err)
	}
	return nil
}

// deleteVolumes deletes the PersistentVolumes labelled for the Pipeline key names and returns
// how many it found. They are listed from the apiserver, not the cache: one created a moment
// ago may not be in the cache yet, and a cluster-scoped volume left behind is one nobody cleans
// up. p, the Pipeline being deleted, receives the events; nil when it is gone.
func (r *Reconciler) deleteVolumes(ctx context.Context, key types.NamespacedName, p *pipelinev1.Pipeline) (int, error) {
	pvs := &corev1.PersistentVolumeList{}
	if err := r.APIReader.List(ctx, pvs, volumesOf(key)); err != nil {
		return 0, fmt.Errorf("list persistent volumes: %w", err)
	}
	var errs []error
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		errs = append(errs, r.applier().Delete(ctx, p, pv, "PersistentVolume", client.Preconditions{UID: &pv.UID}))
	}
	return len(pvs.Items), errors.Join(errs...)
}

// volumeSelector selects the PersistentVolumes of p.
func volumeSelector(p *pipelinev1.Pipeline) client.MatchingLabels {
	return volumesOf(client.ObjectKeyFromObject(p))
}

// volumesOf selects the PersistentVolumes of the Pipeline key names.
func volumesOf(key types.NamespacedName) client.MatchingLabels {
	return client.MatchingLabels{resources.LabelPipeline: key.Name, resources.LabelPipelineNamespace: key.Namespace}
}
