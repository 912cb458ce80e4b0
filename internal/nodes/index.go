package nodes

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/hub"
)

// The cache indexes that make a node event cost what the Pipelines on that node cost, instead
// of every node times every Pipeline: a label selector makes the cache scan (and copy) every
// object of the kind, an exact match on an indexed field reads one bucket. SetupIndexes
// registers them.
const (
	// IndexHostname indexes Nodes by their kubernetes.io/hostname label (see NodeHostname).
	IndexHostname = "node.hostname"
	// IndexPipelineNodes indexes Pipelines by the nodes they may run on (see PipelineNodes).
	IndexPipelineNodes = "pipeline.nodes"
)

// SetupIndexes registers IndexHostname and IndexPipelineNodes with indexer (a manager's
// GetFieldIndexer(), or a cache), before it starts. Resolve, Exists and PipelinesOn read
// through them.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Node{}, IndexHostname, NodeHostname); err != nil {
		return fmt.Errorf("index nodes by %s: %w", corev1.LabelHostname, err)
	}
	if err := indexer.IndexField(ctx, hub.Object(), IndexPipelineNodes, StoredPipelineNodes); err != nil {
		return fmt.Errorf("index pipelines by their nodes: %w", err)
	}
	return nil
}

// NodeHostname is the index function of IndexHostname: the value of the node's
// kubernetes.io/hostname label, by which Resolve finds the node of a location that names no
// node (as a label selector on it matched before the index: a node without the label has no
// value, even though Hostname falls back to its name).
func NodeHostname(obj client.Object) []string {
	v, ok := obj.GetLabels()[corev1.LabelHostname]
	if !ok {
		return nil
	}
	return []string{v}
}

// PipelineNodes is the index function of IndexPipelineNodes: every node name the Pipeline may
// run on, each once: each step's location and fallbackLocations (Step.Locations), and the
// router's location and fallbackLocations (Router.Locations) when the router is enabled.
func PipelineNodes(obj client.Object) []string {
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
	if rt := p.Spec.Router; rt != nil && rt.Enabled {
		for _, n := range rt.Locations() {
			add(n)
		}
	}
	return out
}

// StoredPipelineNodes is PipelineNodes of a Pipeline as the cache holds it (v1): the index
// function of IndexPipelineNodes.
var StoredPipelineNodes = hub.IndexFunc(func(p *pipelinev1.Pipeline) []string { return PipelineNodes(p) })

// Hostname is the name a location uses for node: its kubernetes.io/hostname label, or its
// name when it has none.
func Hostname(node client.Object) string {
	if h := node.GetLabels()[corev1.LabelHostname]; h != "" {
		return h
	}
	return node.GetName()
}

// PipelinesOn are the Pipelines that may run on node (PipelineNodes): those that name its
// Hostname or its name, each once, in no particular order. r reads through IndexPipelineNodes;
// a reader without it (see indexMissing) is scanned instead, with the same result.
func PipelinesOn(ctx context.Context, r client.Reader, node client.Object) ([]types.NamespacedName, error) {
	names := []string{Hostname(node)}
	if node.GetName() != names[0] {
		names = append(names, node.GetName())
	}
	var out []types.NamespacedName
	for _, n := range names {
		keys, err := hub.Keys(ctx, r, client.MatchingFields{IndexPipelineNodes: n})
		if indexMissing(err) {
			return scanPipelinesOn(ctx, r, names)
		}
		if err != nil {
			return nil, fmt.Errorf("list pipelines on node %s: %w", n, err)
		}
		for _, key := range keys {
			if !slices.Contains(out, key) {
				out = append(out, key)
			}
		}
	}
	return out, nil
}

// scanPipelinesOn is PipelinesOn for a reader without IndexPipelineNodes: every Pipeline is
// listed and matched with the index function.
func scanPipelinesOn(ctx context.Context, r client.Reader, names []string) ([]types.NamespacedName, error) {
	list, err := hub.List(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("list pipelines: %w", err)
	}
	var out []types.NamespacedName
	for i := range list {
		on := PipelineNodes(&list[i])
		if slices.ContainsFunc(names, func(n string) bool { return slices.Contains(on, n) }) {
			out = append(out, client.ObjectKeyFromObject(&list[i]))
		}
	}
	return out, nil
}

// indexMissing reports whether err is a reader's refusal of a field selector for which it has
// no index: a cache the index was not registered with (client-go's "Index with name ... does
// not exist"), controller-runtime's fake client without it ("no index with name ..."), or the
// apiserver itself (a non-cached client sends the selector, and a field the apiserver does not
// know is a Bad Request). Such readers are read the way they were before the indexes: the same
// answer, at the cost of a scan in a cache and none more in the apiserver.
//
// The manager's client and cache always have the indexes (the Pipeline controller's
// SetupWithManager registers them); the readers without them are the non-cached clients of tests
// and of the admission webhook's test suite.
func indexMissing(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsBadRequest(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "Index with name") || strings.Contains(msg, "no index with name")
}
