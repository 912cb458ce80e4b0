package pipeline

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// This file is what the operator's benchmarks (test/bench/operator, `make bench`) reach of the
// reconciler from outside a manager: the work of a node event, which they time on its own over
// an informer cache against the scanning implementation the cache indexes replaced. The
// controller reaches the same code through SetupWithManager; nothing else calls these.

// SetupIndexes registers with indexer, a cache made without a manager, the cache indexes the
// reconciler reads through: those SetupWithManager registers with the manager's cache.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	return setupIndexes(ctx, indexer)
}

// NodeEventRequests is what the controller queues for a node event (the map function of its
// watch of nodes), from before (nil for a new node) to after (nil for a deleted one); r.Client
// reads a cache with the indexes of SetupIndexes.
func (r *Reconciler) NodeEventRequests(ctx context.Context, before, after *corev1.Node) []reconcile.Request {
	return r.pipelinesOnNodeEvent(ctx, before, after)
}

// TwoNodesCanHold reports whether two nodes or more can hold pods with this node selector and
// these tolerations: what a pass asks, for each step that may get a disruption budget, to
// decide whether it gets one.
func (r *Reconciler) TwoNodesCanHold(ctx context.Context, selector map[string]string, tolerations []corev1.Toleration) (bool, error) {
	return r.twoNodesCanHold(ctx, selector, tolerations)
}
