package pipeline

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// mayHaveStaleChildren reports whether children of an earlier spec may still exist: the last
// pass did not succeed for this generation (Reconciled), or made children with other names. A converged
// Pipeline skips the search for stale children, which lists every child kind in the namespace;
// so does a new one, whose spec never changed and so never named other children.
func mayHaveStaleChildren(p *pipelinev1.Pipeline) bool {
	st := p.Status
	if p.Generation == 1 && st.ObservedGeneration == 0 {
		return false
	}
	reconciled := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionReconciled)
	if reconciled == nil || reconciled.Status != metav1.ConditionTrue || reconciled.ObservedGeneration != p.Generation ||
		st.ObservedGeneration != p.Generation || len(st.Steps) != len(p.Spec.Steps) ||
		// The volume's name follows from the claim's (a claim stays bound to its volume): a
		// volume kept under the name an earlier version gave it is not a stale one.
		st.Storage.ClaimName != resources.ClaimName(p) || resources.OwnsVolume(p) != (st.Storage.VolumeName != "") ||
		(resources.IngressSpec(p) == nil) != (st.IngressState == "") ||
		resources.RouterEnabled(p) != (st.RouterState != "") {
		return true
	}
	for i, step := range st.Steps {
		if step.DeploymentName != resources.StepObjectName(p, i) {
			return true
		}
	}
	return false
}

// reconcileStale deletes the children the spec no longer describes: steps that were removed
// or renamed, autoscalers and disruption budgets the steps no longer need, nfs, csi or
// modelStorageClass storage that was replaced (never a claim a StorageClass provisioned, nor
// any storage while the pass holds it: see scope.holdStorage), an Ingress the spec dropped and
// a router it disabled. The steps' NetworkPolicy, named after the Pipeline alone, is
// reconcileNetworkPolicy's to delete, on every pass.
func (r *Reconciler) reconcileStale(ctx context.Context, s *scope) error {
	p := s.pipeline
	wanted := map[string]bool{}
	for i := range p.Spec.Steps {
		wanted[resources.StepObjectName(p, i)] = true
	}
	autoscalers, budgets := wantedScalingChildren(s)
	inNamespace := []client.ListOption{client.InNamespace(p.Namespace), client.MatchingLabels{resources.LabelPipeline: p.Name}}

	var errs []error
	deleteUnwanted := func(list client.ObjectList, kind string, keep func(client.Object) bool, opts ...client.ListOption) {
		_, err := r.deleteOwned(ctx, p, list, kind, func(o client.Object) bool { return !keep(o) }, opts...)
		errs = append(errs, err)
	}
	// The router's objects are reconcileRouter's to keep or delete (deleteDisabledRouter); by
	// name too, while enabled: a step's object the router took over in this pass may still
	// carry the step's labels in the cache.
	isRouter := func(o client.Object) bool {
		return resources.IsRouterObject(o) || (resources.RouterEnabled(p) && o.GetName() == resources.RouterObjectName(p))
	}
	isStep := func(o client.Object) bool { return wanted[o.GetName()] || isRouter(o) }
	deleteUnwanted(&appsv1.DeploymentList{}, "Deployment", isStep, inNamespace...)
	deleteUnwanted(&corev1.ServiceList{}, "Service", isStep, inNamespace...)
	deleteUnwanted(&autoscalingv2.HorizontalPodAutoscalerList{}, "HorizontalPodAutoscaler",
		func(o client.Object) bool { return autoscalers[o.GetName()] }, inNamespace...)
	deleteUnwanted(&policyv1.PodDisruptionBudgetList{}, "PodDisruptionBudget",
		func(o client.Object) bool { return budgets[o.GetName()] || isRouter(o) }, inNamespace...)
	// A claim a StorageClass provisioned (storageClass storage) holds the models, which would go
	// with it: it is kept whatever the spec says now, and goes with the Pipeline. Admission
	// refuses the changes that would replace it.
	deleteUnwanted(&corev1.PersistentVolumeClaimList{}, "PersistentVolumeClaim", func(o client.Object) bool {
		pvc, ok := o.(*corev1.PersistentVolumeClaim)
		return s.obs.StorageHeld || (resources.OwnsStorage(p) && o.GetName() == resources.ClaimName(p)) || (ok && ptr.Deref(pvc.Spec.StorageClassName, "") != "")
	}, inNamespace...)
	deleteUnwanted(&networkingv1.IngressList{}, "Ingress", func(o client.Object) bool {
		return resources.IngressSpec(p) != nil && o.GetName() == resources.IngressName(p)
	}, inNamespace...)
	// Without the name this pass wants (s.volumeName), every volume of p is kept: it may be the
	// one the claim is bound to.
	deleteUnwanted(&corev1.PersistentVolumeList{}, "PersistentVolume", func(o client.Object) bool {
		return s.obs.StorageHeld || (resources.OwnsVolume(p) && (s.volumeName == "" || o.GetName() == s.volumeName))
	}, volumeSelector(p))
	return errors.Join(errs...)
}

// deleteOwned lists list with opts and deletes the objects of p (resources.OwnedBy) that drop
// accepts, but for those already being deleted; it returns "<kind> <name>" of each it deleted.
func (r *Reconciler) deleteOwned(ctx context.Context, p *pipelinev1.Pipeline, list client.ObjectList, kind string,
	drop func(client.Object) bool, opts ...client.ListOption) ([]string, error) {
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("list %s: %w", kind, err)
	}
	var deleted []string
	var errs []error
	for _, obj := range objects(list) {
		if !resources.OwnedBy(p, obj) || !drop(obj) || !obj.GetDeletionTimestamp().IsZero() {
			continue
		}
		if err := r.applier().Delete(ctx, p, obj, kind); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, kind+" "+obj.GetName())
	}
	return deleted, errors.Join(errs...)
}

// objects are the items of a list.
func objects(list client.ObjectList) []client.Object {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	out := make([]client.Object, 0, len(items))
	for _, item := range items {
		if obj, ok := item.(client.Object); ok {
			out = append(out, obj)
		}
	}
	return out
}
