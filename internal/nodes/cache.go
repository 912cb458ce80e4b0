package nodes

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// StripForPlacement is the cache transform of Nodes: it keeps what placement reads (name,
// labels, creation time, spec.unschedulable, NoSchedule and NoExecute taints, the Ready
// condition without its heartbeat) and drops the rest (annotations, managedFields, images,
// addresses, capacity, nodeInfo, daemonEndpoints, volumes, the other conditions), which is most
// of a Node's size.
func StripForPlacement(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Generation: n.Generation,
			CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp, Labels: n.Labels,
		},
		Spec: corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: placementTaints(n)},
	}
	if c := ReadyCondition(n); c != nil {
		ready := *c
		ready.LastHeartbeatTime = metav1.Time{}
		out.Status.Conditions = []corev1.NodeCondition{ready}
	}
	return out, nil
}

// PlacementChanged passes the node events that can change where a step runs or what its
// status says: a node added or removed, its labels (the hostname, and those a nodeSelector matches), its Ready condition's status,
// reason or transition time, its cordon, or its NoSchedule and NoExecute taints (with the time a
// taint was added, the clock of a NoExecute taint). Heartbeats and every other status update are
// ignored.
func PlacementChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldNode, okOld := e.ObjectOld.(*corev1.Node)
			newNode, okNew := e.ObjectNew.(*corev1.Node)
			if !okOld || !okNew {
				return true
			}
			return PlacementDiffers(oldNode, newNode)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// PlacementDiffers reports whether a and b differ in what placement reads.
func PlacementDiffers(a, b *corev1.Node) bool {
	// Every label, not only the hostname: a step's nodeSelector decides which nodes can hold
	// its pods, and with them whether it gets a disruption budget.
	if !maps.Equal(a.Labels, b.Labels) || a.Spec.Unschedulable != b.Spec.Unschedulable {
		return true
	}
	if !slices.EqualFunc(placementTaints(a), placementTaints(b), func(x, y corev1.Taint) bool {
		return x.Key == y.Key && x.Value == y.Value && x.Effect == y.Effect && x.TimeAdded.Equal(y.TimeAdded)
	}) {
		return true
	}
	ra, rb := ReadyCondition(a), ReadyCondition(b)
	if (ra == nil) != (rb == nil) {
		return true
	}
	return ra != nil && (ra.Status != rb.Status || ra.Reason != rb.Reason ||
		!equality.Semantic.DeepEqual(ra.LastTransitionTime, rb.LastTransitionTime))
}

// placementTaints are the taints of n that can keep a step's pods off it: NoSchedule and
// NoExecute; nil when there are none.
func placementTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}
