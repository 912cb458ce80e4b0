package pipeline

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
)

// indexPipelineNodes indexes the cached Pipelines by the nodes they may run on (see
// pipelineNodes), so that a node event costs what the Pipelines on that node cost, instead of
// every node times every Pipeline: an exact match on an indexed field reads one bucket of the
// cache. setupPipelineIndex registers it.
const indexPipelineNodes = "pipeline.nodes"

// setupPipelineIndex registers indexPipelineNodes with indexer (a manager's GetFieldIndexer(),
// or a cache), before it starts. pipelinesOn reads through it.
func setupPipelineIndex(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &pipelinev1.Pipeline{}, indexPipelineNodes, pipelineNodes); err != nil {
		return fmt.Errorf("index pipelines by their nodes: %w", err)
	}
	return nil
}

// pipelineNodes is the index function of indexPipelineNodes: every node name the Pipeline may
// run on, each once: each step's location and fallbackLocations (Step.Locations), and the
// router's location and fallbackLocations (Router.Locations) with dataPath.mode Router.
func pipelineNodes(obj client.Object) []string {
	p, ok := obj.(*pipelinev1.Pipeline)
	if !ok {
		return nil
	}
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	for i := range p.Spec.Steps {
		for _, n := range p.Spec.Steps[i].Locations() {
			add(n)
		}
	}
	for _, n := range p.Spec.RouterSettings().Locations() {
		add(n)
	}
	return out
}

// pipelinesOn are the Pipelines that may run on node (pipelineNodes): those that name its
// nodes.Hostname or its name, each once, in no particular order. r reads through
// indexPipelineNodes; a reader without it (see nodes.IndexMissing) is scanned instead, with the
// same result.
func pipelinesOn(ctx context.Context, r client.Reader, node client.Object) ([]types.NamespacedName, error) {
	names := []string{nodes.Hostname(node)}
	if node.GetName() != names[0] {
		names = append(names, node.GetName())
	}
	var out []types.NamespacedName
	// A set, not a search of out: a node may hold thousands of Pipelines.
	seen := sets.New[types.NamespacedName]()
	for _, n := range names {
		list := &pipelinev1.PipelineList{}
		// Only names are read, and nothing is changed: the cache's own objects need no copy.
		err := r.List(ctx, list, client.MatchingFields{indexPipelineNodes: n}, client.UnsafeDisableDeepCopy)
		if nodes.IndexMissing(err) {
			return scanPipelinesOn(ctx, r, names)
		}
		if err != nil {
			return nil, fmt.Errorf("list pipelines on node %s: %w", n, err)
		}
		for i := range list.Items {
			if key := client.ObjectKeyFromObject(&list.Items[i]); !seen.Has(key) {
				seen.Insert(key)
				out = append(out, key)
			}
		}
	}
	return out, nil
}

// scanPipelinesOn is pipelinesOn for a reader without indexPipelineNodes: every Pipeline is
// listed and matched with the index function.
func scanPipelinesOn(ctx context.Context, r client.Reader, names []string) ([]types.NamespacedName, error) {
	list := &pipelinev1.PipelineList{}
	// The Pipelines are only read: the cache's own objects need no copy.
	if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list pipelines: %w", err)
	}
	var out []types.NamespacedName
	for i := range list.Items {
		on := pipelineNodes(&list.Items[i])
		if slices.ContainsFunc(names, func(n string) bool { return slices.Contains(on, n) }) {
			out = append(out, client.ObjectKeyFromObject(&list.Items[i]))
		}
	}
	return out, nil
}
