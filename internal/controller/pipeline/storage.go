package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// claimRecheckInterval is how often a Pipeline that mounts a claim the operator does not own
// (and so does not watch) looks at it again until it is bound.
const claimRecheckInterval = 15 * time.Second

// storageIdentityRecheckInterval is how often a Pipeline whose storage identity is pending is
// looked at again while the operator waits for it to be recorded.
const storageIdentityRecheckInterval = 5 * time.Second

// awaitStorageIdentity is the pass of a Pipeline whose storage identity is pending
// (pipelinev1.Pipeline.StorageIdentityPending): the names of its volume and claim may be other
// than those the recipe gives, so nothing is created, moved or deleted, not even a stale child
// (the claim the recipe does not name may be the one its steps mount). The identity is recorded
// (RecordStorageIdentity), and the update of the Pipeline starts the next pass; without a way to
// record it, the status says the Pipeline waits, and it is looked at again shortly.
func (r *Reconciler) awaitStorageIdentity(ctx context.Context, p *pipelinev1.Pipeline) (ctrl.Result, error) {
	if r.RecordStorageIdentity != nil && r.RecordStorageIdentity(p.DeepCopy()) {
		// The patch carries p's resourceVersion: the identity is recorded from this version.
		if err := r.patchLocked(ctx, p, func(p *pipelinev1.Pipeline) { r.RecordStorageIdentity(p) }); err != nil {
			return ctrl.Result{}, fmt.Errorf("record the storage identity: %w", err)
		}
		return ctrl.Result{}, nil
	}
	st := p.Status.DeepCopy()
	msg := "The identity that names the model volume and claim is not recorded yet (annotation " +
		pipelinev1.StorageIdentityAnnotation + "): nothing is changed until the storage version migration records it"
	for _, t := range []string{pipelinev1.ConditionProgressing, pipelinev1.ConditionReconciling} {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue,
			Reason: pipelinev1.ReasonStorageIdentityPending, ObservedGeneration: p.Generation, Message: msg})
	}
	return ctrl.Result{RequeueAfter: storageIdentityRecheckInterval}, r.updateStatus(ctx, p, *st)
}

// reconcileStorage makes the model PersistentVolume and claim exist, or finds the user's claim.
// The volume of modelStorageClass storage is made from the class, only while the class exists
// and selects the Pipeline's namespace: otherwise nothing new is made, the status says why, and
// what exists is kept (also by reconcileStale) for the revocation grace, then withdrawn
// (withdrawStorage).
func (r *Reconciler) reconcileStorage(ctx context.Context, s *scope) error {
	p := s.pipeline
	if resources.OwnsStorage(p) {
		var src resources.VolumeSource
		if resources.OwnsVolume(p) {
			name, err := r.volumeName(ctx, p)
			if err != nil {
				return err
			}
			s.volumeName, s.obs.PVName = name, name
			var usable bool
			if src, usable = r.volumeSource(s); !usable {
				if s.grant.withdrawn() {
					err = r.withdrawStorage(ctx, s)
				}
				return errors.Join(err, r.observeStorage(ctx, s))
			}
		}
		// The volume and the claim name each other; they are written together.
		var pvErr error
		var wg sync.WaitGroup
		// Waits also when the claim's write panics: no goroutine of a pass outlives it.
		defer wg.Wait()
		if resources.OwnsVolume(p) {
			wg.Go(func() {
				pvErr = recoverPanic(ctx, "persistent volume", func() error { return r.reconcileVolume(ctx, s, src) })
			})
		}
		pvc := &corev1.PersistentVolumeClaim{}
		ok, err := r.applyChild(ctx, s, pvc, resources.PVC(p, s.volumeName))
		if ok {
			s.obs.PVC = pvc
		}
		wg.Wait()
		return errors.Join(pvErr, err)
	}

	pvc := &corev1.PersistentVolumeClaim{}
	// existingClaim: the claim is the user's; the cache does not hold it.
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: resources.ClaimName(p)}, pvc)
	switch {
	case apierrors.IsNotFound(err):
		s.addProblem(pipelinev1.ReasonClaimNotFound,
			"PersistentVolumeClaim %s named by modelStorage.existingClaim.name does not exist in namespace %s", resources.ClaimName(p), p.Namespace)
		s.requeueWithin(claimRecheckInterval)
	case err != nil:
		return fmt.Errorf("get claim %s: %w", resources.ClaimName(p), err)
	default:
		s.obs.PVC = pvc
		if pvc.Status.Phase != corev1.ClaimBound {
			s.requeueWithin(claimRecheckInterval)
		}
	}
	return nil
}

// volumeName is the name of the model PersistentVolume of p: resources.PVName(p), unless p's
// current claim already exists and is bound (spec.volumeName, which cannot change) to another
// volume that an earlier version of the operator made for it under the name it gave volumes
// then: that volume keeps its name, so that an upgrade neither rebinds nor restarts anything.
// Such a volume is labelled for p and reserved for the claim (resources.VolumeMadeFor); one that
// is gone is made again under the claim's name, as the claim can bind to no other. A new
// Pipeline, or a storage change (which names a new claim), gets resources.PVName(p). Both are
// read from the cache, which holds the operator's claims and volumes.
func (r *Reconciler) volumeName(ctx context.Context, p *pipelinev1.Pipeline) (string, error) {
	name := resources.PVName(p)
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: resources.ClaimName(p)}, pvc)
	switch {
	case apierrors.IsNotFound(err):
		return name, nil
	case err != nil:
		return "", fmt.Errorf("get claim %s: %w", resources.ClaimName(p), err)
	}
	bound := pvc.Spec.VolumeName
	// Only the name an earlier version gave p's volume is kept: a claim that names any other
	// volume (one written by hand, naming the volume another Pipeline will want) gets nothing
	// made under that name.
	if bound != resources.LegacyPVName(p) || !resources.OwnedBy(p, pvc) {
		return name, nil
	}
	pv := &corev1.PersistentVolume{}
	err = r.Client.Get(ctx, types.NamespacedName{Name: bound}, pv)
	switch {
	case apierrors.IsNotFound(err):
		return bound, nil
	case err != nil:
		return "", fmt.Errorf("get persistent volume %s: %w", bound, err)
	case !resources.VolumeMadeFor(p, pvc, pv):
		// Someone else's volume: never taken over. The claim, bound to it by name, cannot
		// follow a volume of another name: the refusal of its update says so.
		return name, nil
	}
	return bound, nil
}

// reconcileVolume makes the model PersistentVolume exist as the spec says. A Released volume
// was bound to a claim that is gone (deleted by someone, or left by an earlier Pipeline of the
// same name whose finalizer was removed by hand): it can never bind to the current claim, and
// is not taken over. It is deleted (its reclaim policy is Retain: the model data stays where
// it is), and its deletion event starts the pass that makes a new one.
func (r *Reconciler) reconcileVolume(ctx context.Context, s *scope, src resources.VolumeSource) error {
	pv := &corev1.PersistentVolume{}
	ok, err := r.applyChild(ctx, s, pv, resources.PV(s.pipeline, s.volumeName, src))
	switch {
	case !ok:
		return err
	case err != nil:
		// The apiserver refused the update: the volume is described as it is.
		s.obs.PV = pv
		return err
	case !pv.DeletionTimestamp.IsZero():
		return nil
	case pv.Status.Phase == corev1.VolumeReleased:
		r.Recorder.Eventf(s.pipeline, pv, corev1.EventTypeNormal, "VolumeReleased", "Delete",
			"PersistentVolume %s is Released: the claim it was bound to (uid %s) is gone, so it cannot bind again; "+
				"it is deleted and made anew (reclaim policy Retain: the model data is not touched)",
			pv.Name, ptr.Deref(pv.Spec.ClaimRef, corev1.ObjectReference{}).UID)
		// Only the version seen Released: one changed since (re-bound by an administrator) is
		// refused with a conflict, and the pass runs again from the newer version.
		return r.applier().Delete(ctx, s.pipeline, pv, "PersistentVolume",
			client.Preconditions{UID: &pv.UID, ResourceVersion: &pv.ResourceVersion})
	}
	s.obs.PV = pv
	return nil
}

// volumeSource is the source of the model PersistentVolume: the spec's for nfs and csi storage,
// the ModelStorageClass's for modelStorageClass storage, as the pass found it (scope.grant). It
// returns false, having recorded the problem and held the storage (scope.holdStorage), when the
// class does not exist or does not select the Pipeline's namespace.
func (r *Reconciler) volumeSource(s *scope) (resources.VolumeSource, bool) {
	g := s.grant
	if g == nil {
		return resources.InlineVolumeSource(s.pipeline), true
	}
	if !g.access.Authorized {
		s.holdStorage()
		s.addProblem(g.access.Reason, "%s", g.access.Message)
		return resources.VolumeSource{}, false
	}
	return resources.ClassVolumeSource(g.class), true
}

// observeStorage records the model volume and claim as they are, from the cache, for a pass
// that does not write them.
func (r *Reconciler) observeStorage(ctx context.Context, s *scope) error {
	p := s.pipeline
	pv, pvc := &corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}
	volume := cmp.Or(s.volumeName, resources.PVName(p))
	pvErr := r.Client.Get(ctx, client.ObjectKey{Name: volume}, pv)
	if pvErr == nil {
		s.obs.PV = pv
	}
	pvcErr := r.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: resources.ClaimName(p)}, pvc)
	if pvcErr == nil {
		s.obs.PVC = pvc
	}
	return errors.Join(ignoreNotFound(pvErr, "get PersistentVolume "+volume),
		ignoreNotFound(pvcErr, "get claim "+resources.ClaimName(p)))
}

// ignoreNotFound is nil for nil or a NotFound error, else err wrapped with what.
func ignoreNotFound(err error, what string) error {
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
