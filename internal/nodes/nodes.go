// Package nodes answers whether the node a step's location names exists.
package nodes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WithHostname reports whether some node carries the kubernetes.io/hostname label hostname,
// which is what a step's node selector matches. It reads node metadata only.
func WithHostname(ctx context.Context, r client.Reader, hostname string) (bool, error) {
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.List(ctx, nodes, client.MatchingLabels{corev1.LabelHostname: hostname}); err != nil {
		return false, fmt.Errorf("list nodes with %s=%s: %w", corev1.LabelHostname, hostname, err)
	}
	return len(nodes.Items) > 0, nil
}
