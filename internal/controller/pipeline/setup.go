package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/hub"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// maxErrorBackoff bounds how long a Pipeline whose pass failed waits for the next pass. A pass
// that fails queues no timer (failover, failback, rechecks); with the default limiter a child
// that keeps failing would back off to 16 minutes, and a step's failover wait with it.
const maxErrorBackoff = time.Minute

// controllerOptions are the Pipeline controller's options: n passes in parallel (0 is
// controller-runtime's default), failed passes retried with an exponential back-off from 5 ms
// to maxErrorBackoff.
func controllerOptions(n int) controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: n,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxErrorBackoff),
	}
}

// WithMaxConcurrentReconciles sets how many Pipelines are reconciled in parallel.
func WithMaxConcurrentReconciles(n int) func(*builder.Builder) {
	return func(b *builder.Builder) {
		b.WithOptions(controllerOptions(n))
	}
}

// SetupWithManager registers the reconciler: it watches Pipelines, their children, the nodes
// (whole objects, cached stripped to what placement reads: a node added or removed, its Ready
// condition, cordon and taints), the labels of namespaces and ModelStorageClasses. It first registers the
// cache indexes that node lookups and node events read through (setupIndexes).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts ...func(*builder.Builder)) error {
	if err := setupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	b := r.watches(ctrl.NewControllerManagedBy(mgr).For(hub.Object())).WithOptions(controllerOptions(0))
	for _, o := range opts {
		o(b)
	}
	return b.Complete(r)
}

// watches adds what the Pipeline controller watches besides Pipelines: their children, the
// nodes' changes that matter for placement (appearance, Ready condition, cordon, taints; nodes
// are watched as whole objects and the cache keeps only those fields), namespaces whose labels
// change (the step pods' security context depends on the Pod Security level, and a
// ModelStorageClass selects namespaces by their labels), and ModelStorageClasses (their
// Pipelines make their volumes from them). Namespaces alone are watched as metadata only.
func (r *Reconciler) watches(b *builder.Builder) *builder.Builder {
	return b.
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Owns(&networkingv1.Ingress{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}, builder.WithPredicates(autoscalerChanged())).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.PersistentVolume{}, handler.EnqueueRequestsFromMapFunc(pipelineOfVolume)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.pipelinesOnNode),
			builder.WithPredicates(nodes.PlacementChanged())).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.pipelinesInNamespace),
			builder.WithPredicates(namespaceLabelsChanged())).
		Watches(&pipelinev1beta1.ModelStorageClass{}, handler.EnqueueRequestsFromMapFunc(r.pipelinesOfClass)).
		Named("pipeline")
}

// pipelineOfVolume maps a PersistentVolume to the Pipeline its labels name.
func pipelineOfVolume(_ context.Context, obj client.Object) []reconcile.Request {
	l := obj.GetLabels()
	if l[resources.LabelPipeline] == "" || l[resources.LabelPipelineNamespace] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[resources.LabelPipelineNamespace], Name: l[resources.LabelPipeline]}}}
}

// pipelinesOnNode maps a node to the Pipelines with a step that may run on it (its location or
// one of its fallbackLocations), or with the router located on it, and to those with a step
// whose disruption budget depends on the nodes (see needsDisruptionBudget), through the cache's
// indexes.
func (r *Reconciler) pipelinesOnNode(ctx context.Context, obj client.Object) []reconcile.Request {
	keys, err := nodes.PipelinesOn(ctx, r.Client, obj)
	if err != nil {
		return nil
	}
	withBudgets, err := hub.Keys(ctx, r.Client, client.MatchingFields{indexBudgetSteps: "true"})
	if err != nil {
		return nil
	}
	for _, key := range withBudgets {
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return requests(keys)
}

// requests are the reconcile requests of the Pipelines keys names.
func requests(keys []types.NamespacedName) []reconcile.Request {
	reqs := make([]reconcile.Request, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, reconcile.Request{NamespacedName: k})
	}
	return reqs
}

// pipelinesInNamespace maps a namespace to its Pipelines.
func (r *Reconciler) pipelinesInNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	keys, err := hub.Keys(ctx, r.Client, client.InNamespace(obj.GetName()))
	if err != nil {
		return nil
	}
	return requests(keys)
}

// namespaceLabelsChanged passes namespace updates that change the namespace's labels: its
// enforced Pod Security level, or whether a ModelStorageClass selects it. A new namespace holds
// no Pipeline yet, and the Pipelines of a deleted one go with it.
func namespaceLabelsChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// pipelinesOfClass maps a ModelStorageClass to the Pipelines whose storage names it, through
// the cache's index: a class that appears, changes its namespaceSelector or goes changes what
// their storage may be.
func (r *Reconciler) pipelinesOfClass(ctx context.Context, obj client.Object) []reconcile.Request {
	keys, err := hub.Keys(ctx, r.Client, client.MatchingFields{indexModelStorageClass: obj.GetName()})
	if err != nil {
		return nil
	}
	return requests(keys)
}

// setupIndexes registers the cache indexes the reconciler reads through: those of node lookups
// and node events (nodes.SetupIndexes), indexBudgetSteps and indexModelStorageClass.
func setupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := nodes.SetupIndexes(ctx, indexer); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, hub.Object(), indexBudgetSteps, hub.IndexFunc(budgetSteps)); err != nil {
		return fmt.Errorf("index Pipelines by steps that may get a disruption budget: %w", err)
	}
	if err := indexer.IndexField(ctx, hub.Object(), indexModelStorageClass, hub.IndexFunc(modelStorageClassOf)); err != nil {
		return fmt.Errorf("index Pipelines by ModelStorageClass: %w", err)
	}
	return nil
}

// indexModelStorageClass indexes Pipelines by the ModelStorageClass their storage is made from.
const indexModelStorageClass = "pipeline.modelStorageClassName"

// modelStorageClassOf is the value of indexModelStorageClass for a Pipeline: none unless its
// storage type is modelStorageClass.
func modelStorageClassOf(p *pipelinev1beta1.Pipeline) []string {
	if name := resources.ModelStorageClassName(p); name != "" {
		return []string{name}
	}
	return nil
}

// indexBudgetSteps indexes Pipelines under "true" when a step may get a disruption budget: any
// node's change may change how many nodes can hold its pods.
const indexBudgetSteps = "pipeline.budgetSteps"

// budgetSteps is the value of indexBudgetSteps for a Pipeline.
func budgetSteps(p *pipelinev1beta1.Pipeline) []string {
	for i := range p.Spec.Steps {
		if resources.NeedsDisruptionBudget(p, i) {
			return []string{"true"}
		}
	}
	return nil
}
