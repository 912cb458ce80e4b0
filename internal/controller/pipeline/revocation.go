package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
)

// DefaultStorageRevocationGrace is how long the steps of a Pipeline keep the model storage of
// a ModelStorageClass that no longer grants it (deleted, or no longer selecting the
// namespace) before the operator withdraws it.
const DefaultStorageRevocationGrace = 15 * time.Minute

// classGrant is what the ModelStorageClass of a Pipeline's modelStorageClass storage grants its
// namespace at the start of a pass.
type classGrant struct {
	access status.StorageAccess
	// class is the class, when it grants the storage.
	class *pipelinev1.ModelStorageClass
	// deadline is when storage the class no longer grants is withdrawn: the grace counted from
	// the ModelStorageAuthorized condition's last transition to False (or from now, the pass
	// that first sees it).
	deadline time.Time
}

// checkGrant is what the ModelStorageClass named by p's storage grants p's namespace (nil for
// other storage). The class and the namespace's labels are read from the cache; the start of
// a revocation from p's ModelStorageAuthorized condition, which only the operator writes.
func (r *Reconciler) checkGrant(ctx context.Context, p *pipelinev1.Pipeline) (*classGrant, error) {
	name := resources.ModelStorageClassName(p)
	if name == "" || !resources.OwnsVolume(p) {
		return nil, nil
	}
	g := &classGrant{}
	class := &pipelinev1.ModelStorageClass{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: name}, class)
	switch {
	case apierrors.IsNotFound(err):
		g.access.Reason = pipelinev1.ReasonModelStorageClassNotFound
		g.access.Message = fmt.Sprintf("ModelStorageClass %s named by modelStorage.modelStorageClass.name does not exist: "+
			"no volume is made for namespace %s until a cluster administrator creates the class, or the Pipeline names one that exists", name, p.Namespace)
	case err != nil:
		return nil, fmt.Errorf("get ModelStorageClass %s: %w", name, err)
	default:
		labels, err := r.namespaceLabels(ctx, p.Namespace)
		if err != nil {
			return nil, err
		}
		selected, err := class.Selects(labels)
		if selected {
			g.class = class
			g.access = status.StorageAccess{Authorized: true, Reason: pipelinev1.ReasonModelStorageClassSelects,
				Message: fmt.Sprintf("ModelStorageClass %s selects namespace %s", name, p.Namespace)}
			return g, nil
		}
		why := "its namespaceSelector does not select the namespace"
		if err != nil {
			why = err.Error()
		}
		g.access.Reason = pipelinev1.ReasonModelStorageClassNotPermitted
		g.access.Message = fmt.Sprintf("ModelStorageClass %s may not be used in namespace %s: %s; no new volume is made from it. "+
			"Ask a cluster administrator to add namespace %s to the namespaceSelector of ModelStorageClass %s",
			name, p.Namespace, why, p.Namespace, name)
	}

	now := r.now()
	since := now
	if c := meta.FindStatusCondition(p.Status.Conditions, pipelinev1.ConditionModelStorageAuthorized); c != nil && c.Status == metav1.ConditionFalse {
		since = c.LastTransitionTime.Time
	}
	g.deadline = since.Add(r.revocationGrace()).Truncate(time.Second)
	g.access.Withdrawn = !now.Before(g.deadline)
	at := g.deadline.UTC().Format(time.RFC3339)
	if g.access.Withdrawn {
		g.access.Message += fmt.Sprintf(". The storage was withdrawn at %s: the steps are scaled to zero and the model volume and claim "+
			"deleted; they are made again once the class grants the storage", at)
	} else {
		g.access.Message += fmt.Sprintf(". Unless the class grants the storage again, it is withdrawn at %s (revocation grace %s): "+
			"the steps are then scaled to zero and the model volume and claim deleted", at, r.revocationGrace())
	}
	return g, nil
}

// revocationGrace is StorageRevocationGrace, DefaultStorageRevocationGrace when unset.
func (r *Reconciler) revocationGrace() time.Duration {
	if r.StorageRevocationGrace == nil {
		return DefaultStorageRevocationGrace
	}
	return *r.StorageRevocationGrace
}

// withdrawn reports whether g withdraws the storage (nil g does not).
func (g *classGrant) withdrawn() bool { return g != nil && g.access.Withdrawn }

// untilWithdrawal is how long until g withdraws storage it no longer grants; 0 when it grants
// it, or already withdrew it.
func (g *classGrant) untilWithdrawal(now time.Time) time.Duration {
	if g == nil || g.access.Authorized || g.access.Withdrawn {
		return 0
	}
	return max(g.deadline.Sub(now), time.Second)
}

// withdrawStorage deletes the model claims and volumes of p, which its ModelStorageClass no
// longer grants: the steps, scaled to zero in the same pass, release the claim, which the
// apiserver then removes, and the volume with it. The reclaim policy of the volumes is Retain:
// the data on the share is not touched. A claim a StorageClass provisioned (from an earlier
// storageClass spec) is no grant of the class, and is kept.
func (r *Reconciler) withdrawStorage(ctx context.Context, s *scope) error {
	p := s.pipeline
	claims, claimErr := r.deleteOwned(ctx, p, &corev1.PersistentVolumeClaimList{}, "PersistentVolumeClaim", func(o client.Object) bool {
		c, ok := o.(*corev1.PersistentVolumeClaim)
		return ok && ptr.Deref(c.Spec.StorageClassName, "") == ""
	}, client.InNamespace(p.Namespace), client.MatchingLabels{resources.LabelPipeline: p.Name})
	volumes, volumeErr := r.deleteOwned(ctx, p, &corev1.PersistentVolumeList{}, "PersistentVolume",
		func(client.Object) bool { return true }, volumeSelector(p))
	if deleted := append(claims, volumes...); len(deleted) > 0 {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "ModelStorageWithdrawn", "Delete",
			"ModelStorageClass %s no longer grants namespace %s its storage (%s) and the revocation grace has passed: "+
				"the steps are scaled to zero and %s deleted; the data on the share is not touched",
			resources.ModelStorageClassName(p), p.Namespace, s.grant.access.Reason, strings.Join(deleted, ", "))
	}
	return errors.Join(claimErr, volumeErr)
}
