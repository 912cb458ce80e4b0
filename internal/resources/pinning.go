package resources

import (
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// nodeNameField is the node field a pod is pinned by: the node's name, which only the control
// plane sets. A node selector on a label (kubernetes.io/hostname) would let a kubelet, which
// may rewrite the labels of its own Node, attract the pods of other nodes.
const nodeNameField = "metadata.name"

// pinnedTo is the affinity that pins a pod to the node named node: a required node affinity
// whose one term matches the field metadata.name.
func pinnedTo(node string) *corev1ac.AffinityApplyConfiguration {
	return corev1ac.Affinity().WithNodeAffinity(corev1ac.NodeAffinity().
		WithRequiredDuringSchedulingIgnoredDuringExecution(corev1ac.NodeSelector().
			WithNodeSelectorTerms(corev1ac.NodeSelectorTerm().
				WithMatchFields(corev1ac.NodeSelectorRequirement().
					WithKey(nodeNameField).
					WithOperator(corev1.NodeSelectorOpIn).
					WithValues(node)))))
}

// PinnedNode is the node a pod template made by the operator is pinned to: the node name of
// its required node affinity on metadata.name; else, for a template of an earlier version of
// the operator, which pinned by label, the value of its node selector on
// kubernetes.io/hostname (a location); empty when it is pinned to no node.
func PinnedNode(pod *corev1.PodSpec) string {
	if a := pod.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, req := range term.MatchFields {
				if req.Key == nodeNameField && req.Operator == corev1.NodeSelectorOpIn && len(req.Values) == 1 {
					return req.Values[0]
				}
			}
		}
	}
	return pod.NodeSelector[corev1.LabelHostname]
}
