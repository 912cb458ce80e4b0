package nodes

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The cache index that makes finding the node of a location that names none cost one bucket of
// the cache, instead of a scan: a label selector makes the cache scan (and copy) every Node, an
// exact match on an indexed field reads one bucket. SetupIndexes registers it.
const (
	// IndexHostname indexes Nodes by their kubernetes.io/hostname label (see NodeHostname).
	IndexHostname = "node.hostname"
)

// SetupIndexes registers IndexHostname with indexer (a manager's GetFieldIndexer(), or a
// cache), before it starts. Resolve and Exists read through it.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Node{}, IndexHostname, NodeHostname); err != nil {
		return fmt.Errorf("index nodes by %s: %w", corev1.LabelHostname, err)
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

// Hostname is the name a location uses for node: its kubernetes.io/hostname label, or its
// name when it has none.
func Hostname(node client.Object) string {
	if h := node.GetLabels()[corev1.LabelHostname]; h != "" {
		return h
	}
	return node.GetName()
}

// IndexMissing reports whether err is a reader's refusal of a field selector for which it has
// no index: a cache the index was not registered with (client-go's "Index with name ... does
// not exist"), controller-runtime's fake client without it ("no index with name ..."), or the
// apiserver itself (a non-cached client sends the selector, and a field the apiserver does not
// know is a Bad Request). Such readers are read the way they were before the indexes: the same
// answer, at the cost of a scan in a cache and none more in the apiserver.
//
// The manager's client and cache always have the indexes (the Pipeline controller's
// SetupWithManager registers them); the readers without them are the non-cached clients of tests
// and of the admission webhook's test suite.
func IndexMissing(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsBadRequest(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "Index with name") || strings.Contains(msg, "no index with name")
}
