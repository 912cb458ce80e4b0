// Package nodes answers where a step may run: whether the node a location names exists, how
// it stands (Ready, cordoned, tainted), and which of a step's nodes its pods should be pinned to.
package nodes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WithHostname reports whether some node carries the kubernetes.io/hostname label hostname,
// which is what a step's node selector matches.
func WithHostname(ctx context.Context, r client.Reader, hostname string) (bool, error) {
	n, err := Lookup(ctx, r, hostname)
	return n != nil, err
}

// Lookup is the node with the kubernetes.io/hostname label hostname (the first by name when
// several have it); nil when none has. r reads through IndexHostname; a reader without it (see
// indexMissing) is asked with a label selector instead, with the same result.
func Lookup(ctx context.Context, r client.Reader, hostname string) (*corev1.Node, error) {
	list := &corev1.NodeList{}
	err := r.List(ctx, list, client.MatchingFields{IndexHostname: hostname})
	if indexMissing(err) {
		err = r.List(ctx, list, client.MatchingLabels{corev1.LabelHostname: hostname})
	}
	if err != nil {
		return nil, fmt.Errorf("list nodes with %s=%s: %w", corev1.LabelHostname, hostname, err)
	}
	var found *corev1.Node
	for i := range list.Items {
		if found == nil || list.Items[i].Name < found.Name {
			found = &list.Items[i]
		}
	}
	return found, nil
}
