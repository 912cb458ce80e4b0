// Package nodes answers where a step may run: which node a location names, how it stands
// (Ready, cordoned, tainted), and which of a step's nodes its pods should be pinned to.
package nodes

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Resolution is the node a location names. Pods are pinned by node name (a required node
// affinity on metadata.name), which only the control plane sets: a kubelet can rewrite the
// labels of its own Node, kubernetes.io/hostname included, but not its name.
type Resolution struct {
	// Location is the location resolved.
	Location string
	// Name is the node name the pods are pinned to: the name of Node, else Location itself (no
	// node has that name, so the pods stay Pending until one joins).
	Name string
	// Node is the node the location names; nil when none does, or when it is Ambiguous.
	Node *corev1.Node
	// Ambiguous are the names, sorted, of the nodes that carry the kubernetes.io/hostname label
	// Location when no node is named Location and more than one carries it: none of them is
	// chosen, since any node can give itself the label.
	Ambiguous []string
}

// Found reports whether the location names a node.
func (r Resolution) Found() bool { return r.Node != nil }

// AmbiguousMessage says, for messages, which nodes make the location ambiguous and what to do;
// empty when it is not.
func (r Resolution) AmbiguousMessage() string {
	if len(r.Ambiguous) == 0 {
		return ""
	}
	return fmt.Sprintf("location %s is ambiguous: no node is named %s and nodes %s all carry the label %s=%s, "+
		"so none of them is chosen (the pods stay Pending, pinned to a node named %s); set the location to the name of the node",
		r.Location, r.Location, strings.Join(r.Ambiguous, ", "), corev1.LabelHostname, r.Location, r.Location)
}

// Resolve finds the node location names: the node of that name; else, as locations named
// nodes by their kubernetes.io/hostname label before, the one node that carries the label
// location. Several nodes with the label and none with the name is ambiguous. r reads Nodes
// by name, and by label through IndexHostname (a reader without it, see IndexMissing, is asked
// with a label selector instead, with the same result).
func Resolve(ctx context.Context, r client.Reader, location string) (Resolution, error) {
	res := Resolution{Location: location, Name: location}
	node := &corev1.Node{}
	err := r.Get(ctx, client.ObjectKey{Name: location}, node)
	switch {
	case err == nil:
		res.Node = node
		return res, nil
	case !apierrors.IsNotFound(err):
		return res, fmt.Errorf("get node %s: %w", location, err)
	}
	labelled, err := withHostname(ctx, r, location)
	if err != nil {
		return res, err
	}
	switch len(labelled) {
	case 0:
	case 1:
		res.Node, res.Name = &labelled[0], labelled[0].Name
	default:
		for i := range labelled {
			res.Ambiguous = append(res.Ambiguous, labelled[i].Name)
		}
		slices.Sort(res.Ambiguous)
	}
	return res, nil
}

// Exists reports whether some node is named location or carries it as its
// kubernetes.io/hostname label: whether a step pinned there can ever be scheduled without
// another node joining.
func Exists(ctx context.Context, r client.Reader, location string) (bool, error) {
	res, err := Resolve(ctx, r, location)
	return res.Found() || len(res.Ambiguous) > 0, err
}

// withHostname are the nodes with the kubernetes.io/hostname label hostname.
func withHostname(ctx context.Context, r client.Reader, hostname string) ([]corev1.Node, error) {
	list := &corev1.NodeList{}
	err := r.List(ctx, list, client.MatchingFields{IndexHostname: hostname})
	if IndexMissing(err) {
		err = r.List(ctx, list, client.MatchingLabels{corev1.LabelHostname: hostname})
	}
	if err != nil {
		return nil, fmt.Errorf("list nodes with %s=%s: %w", corev1.LabelHostname, hostname, err)
	}
	return list.Items, nil
}
