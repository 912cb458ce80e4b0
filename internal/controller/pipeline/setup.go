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
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
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
	b := r.watches(ctrl.NewControllerManagedBy(mgr).For(&pipelinev1.Pipeline{})).WithOptions(controllerOptions(0))
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
		Owns(&networkingv1.NetworkPolicy{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}, builder.WithPredicates(autoscalerChanged())).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.PersistentVolume{}, handler.EnqueueRequestsFromMapFunc(pipelineOfVolume)).
		Watches(&corev1.Node{}, r.nodeEvents(), builder.WithPredicates(nodes.PlacementChanged())).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.pipelinesInNamespace),
			builder.WithPredicates(namespaceLabelsChanged())).
		Watches(&pipelinev1.ModelStorageClass{}, handler.EnqueueRequestsFromMapFunc(r.pipelinesOfClass)).
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

// nodeEvents is the handler of node events: each queues the Pipelines pipelinesOnNodeEvent
// finds, from the node as it was (nil for a new node) and as it is (nil for a deleted one).
func (r *Reconciler) nodeEvents() handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], before, after client.Object) {
		for _, req := range r.pipelinesOnNodeEvent(ctx, asNode(before), asNode(after)) {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, nil, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object, nil)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, nil, e.Object)
		},
	}
}

// asNode is obj as a Node; nil when it is none (a nil object).
func asNode(obj client.Object) *corev1.Node {
	n, _ := obj.(*corev1.Node)
	return n
}

// pipelinesOnNodeEvent maps a node event, from before (nil for a new node) to after (nil for a
// deleted one), to the Pipelines it concerns, each once, through the cache's indexes: those with
// a step that may run on the node (its location or one of its fallbackLocations) or with the
// router located on it, as it was and as it is; and those whose disruption budgets the event may
// change (budgetsChangedBy).
func (r *Reconciler) pipelinesOnNodeEvent(ctx context.Context, before, after *corev1.Node) []reconcile.Request {
	// A set, not a search of a list: a node may hold thousands of Pipelines.
	keys := sets.New[types.NamespacedName]()
	for _, n := range []*corev1.Node{before, after} {
		if n == nil {
			continue
		}
		on, err := pipelinesOn(ctx, r.Client, n)
		if err != nil {
			return nil
		}
		keys.Insert(on...)
	}
	budgets, err := r.budgetsChangedBy(ctx, before, after)
	if err != nil {
		return nil
	}
	keys.Insert(budgets...)
	return requests(keys.UnsortedList())
}

// budgetsChangedBy are the Pipelines whose disruption budgets a node event, from before (nil
// for a new node) to after (nil for a deleted one), may change: those with a step (or a router)
// that may get one and that the node could hold before but not after, or after but not before
// (canHold). Whether a budget exists depends on how many nodes can hold the pods
// (twoNodesCanHold), and the event changes that count for no other Pipeline. The candidates come
// from indexBudgetNodes, under anyNode and under each label of the node, as it was and as it is:
// a node that stays unable to hold any pod (not Ready, cordoned) reads no index at all.
func (r *Reconciler) budgetsChangedBy(ctx context.Context, before, after *corev1.Node) ([]types.NamespacedName, error) {
	if !mayHoldPods(before) && !mayHoldPods(after) {
		return nil, nil
	}
	values := []string{anyNode}
	for _, n := range []*corev1.Node{before, after} {
		if n == nil {
			continue
		}
		for k, v := range n.Labels {
			if pair := k + "=" + v; !slices.Contains(values, pair) {
				values = append(values, pair)
			}
		}
	}
	var out []types.NamespacedName
	// A Pipeline may be under several of the values: it is weighed once.
	weighed := sets.New[types.NamespacedName]()
	for _, v := range values {
		list := &pipelinev1.PipelineList{}
		// The Pipelines are only read: the cache's own objects need no copy.
		if err := r.Client.List(ctx, list, client.MatchingFields{indexBudgetNodes: v}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list Pipelines with a disruption budget on nodes labelled %s: %w", v, err)
		}
		for i := range list.Items {
			p := &list.Items[i]
			key := client.ObjectKeyFromObject(p)
			if weighed.Has(key) {
				continue
			}
			weighed.Insert(key)
			if budgetChangedBy(p, before, after) {
				out = append(out, key)
			}
		}
	}
	return out, nil
}

// budgetChangedBy reports whether a step of p, or its router, may get a disruption budget and
// could be held by the node before but not after, or after but not before.
func budgetChangedBy(p *pipelinev1.Pipeline, before, after *corev1.Node) bool {
	for i := range p.Spec.Steps {
		s := &p.Spec.Steps[i]
		if resources.NeedsDisruptionBudget(p, i) && canHold(before, s.NodeSelector, s.Tolerations) != canHold(after, s.NodeSelector, s.Tolerations) {
			return true
		}
	}
	return resources.RouterWantsDisruptionBudget(p) && canHold(before, nil, nil) != canHold(after, nil, nil)
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
	keys, err := pipelineKeys(ctx, r.Client, client.InNamespace(obj.GetName()))
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
	keys, err := pipelineKeys(ctx, r.Client, client.MatchingFields{indexModelStorageClass: obj.GetName()})
	if err != nil {
		return nil
	}
	return requests(keys)
}

// setupIndexes registers the cache indexes the reconciler reads through: those of node lookups
// (nodes.SetupIndexes) and node events (setupPipelineIndex), indexBudgetNodes and
// indexModelStorageClass.
func setupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := nodes.SetupIndexes(ctx, indexer); err != nil {
		return err
	}
	if err := setupPipelineIndex(ctx, indexer); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &pipelinev1.Pipeline{}, indexBudgetNodes, pipelineIndex(budgetNodes)); err != nil {
		return fmt.Errorf("index Pipelines by the nodes that may hold pods with a disruption budget: %w", err)
	}
	if err := indexer.IndexField(ctx, &pipelinev1.Pipeline{}, indexModelStorageClass, pipelineIndex(modelStorageClassOf)); err != nil {
		return fmt.Errorf("index Pipelines by ModelStorageClass: %w", err)
	}
	return nil
}

// indexModelStorageClass indexes Pipelines by the ModelStorageClass their storage is made from.
const indexModelStorageClass = "pipeline.modelStorageClassName"

// modelStorageClassOf is the value of indexModelStorageClass for a Pipeline: none unless its
// storage type is ModelStorageClass.
func modelStorageClassOf(p *pipelinev1.Pipeline) []string {
	if name := resources.ModelStorageClassName(p); name != "" {
		return []string{name}
	}
	return nil
}

// indexBudgetNodes indexes the Pipelines with a step, or a router, that may get a disruption
// budget (whether it does depends on the nodes that can hold its pods, see twoNodesCanHold) by a
// label every node that can hold those pods carries: the first of the step's nodeSelector in key
// order, as key=value, or anyNode when it selects no label (the router never does). A node event
// reads the buckets of the node's labels, and the budget of no other Pipeline can depend on it.
const indexBudgetNodes = "pipeline.budgetNodes"

// anyNode is the value of indexBudgetNodes for a budget whose pods any node may hold; no label
// pair has it, as it holds no "=".
const anyNode = "*"

// budgetNodes is the value of indexBudgetNodes for a Pipeline.
func budgetNodes(p *pipelinev1.Pipeline) []string {
	var out []string
	add := func(selector map[string]string) {
		v := anyNode
		if len(selector) > 0 {
			k := slices.Min(slices.Collect(maps.Keys(selector)))
			v = k + "=" + selector[k]
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for i := range p.Spec.Steps {
		if resources.NeedsDisruptionBudget(p, i) {
			add(p.Spec.Steps[i].NodeSelector)
		}
	}
	if resources.RouterWantsDisruptionBudget(p) {
		add(nil)
	}
	return out
}
