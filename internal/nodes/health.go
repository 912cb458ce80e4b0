package nodes

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// State is how a node stands for the placement of a step's pods.
type State string

const (
	// StateReady means the node reports Ready and accepts the step's pods.
	StateReady State = "Ready"
	// StateNotReady means the node's Ready condition is False, Unknown (its kubelet stopped
	// reporting) or was never reported, or the node carries a NoExecute taint the step does not
	// tolerate: its pods are evicted and the node selector keeps them from coming back.
	StateNotReady State = "NotReady"
	// StateUnschedulable means the node is Ready but takes no new pods of the step: it is
	// cordoned or carries a NoSchedule taint the step does not tolerate. Its running pods stay.
	StateUnschedulable State = "Unschedulable"
	// StateMissing means no node has the name.
	StateMissing State = "Missing"
)

// Health is what the operator knows of one node, for one step.
type Health struct {
	// State classifies the node.
	State State
	// Since is when the node's Ready condition last changed status (the node's creation when it
	// never reported one; for a Ready node with a NoExecute taint against the step, when the
	// taint was added); zero for a missing node. It is the only clock of failover and failback,
	// so that a restarted operator keeps the timers.
	Since time.Time
	// Detail says what is wrong, for messages; empty when the node is Ready.
	Detail string
}

// Ready reports whether the node reports Ready, whether or not it accepts new pods.
func (h Health) Ready() bool { return h.State == StateReady || h.State == StateUnschedulable }

// Schedulable reports whether the step's pods can run on the node now: a step may move there.
func (h Health) Schedulable() bool { return h.State == StateReady }

// lifecycleTaints are the taints the node lifecycle controller puts on a node whose Ready
// condition is not True: the Ready condition already says what they say.
var lifecycleTaints = []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, corev1.TaintNodeUnschedulable}

// Classify says how node stands for a step's pods that carry tolerations. node nil is a node
// that does not exist.
func Classify(node *corev1.Node, tolerations []corev1.Toleration) Health {
	if node == nil {
		return Health{State: StateMissing, Detail: "does not exist"}
	}
	ready := ReadyCondition(node)
	if ready == nil {
		return Health{State: StateNotReady, Since: node.CreationTimestamp.Time, Detail: "has not reported Ready yet"}
	}
	if ready.Status != corev1.ConditionTrue {
		detail := fmt.Sprintf("is not ready (Ready %s since %s", ready.Status, ready.LastTransitionTime.UTC().Format(time.RFC3339))
		if ready.Reason != "" {
			detail += ": " + ready.Reason
		}
		return Health{State: StateNotReady, Since: ready.LastTransitionTime.Time, Detail: detail + ")"}
	}
	h := Health{State: StateReady, Since: ready.LastTransitionTime.Time}
	if t := evictingTaint(node, tolerations); t != nil {
		// The taint evicts the step's pods at once: the node is as good as down for the step.
		// A taint without timeAdded (kubectl taint sets it on NoExecute taints; a node written
		// by other means may lack it) counts from the node's Ready transition, the one time the
		// node itself gives: usually long enough ago that the step moves at once.
		if t.TimeAdded != nil && !t.TimeAdded.IsZero() {
			h.Since = t.TimeAdded.Time
		}
		h.State = StateNotReady
		h.Detail = fmt.Sprintf("is ready but tainted %s:%s since %s: the step's pods are evicted", t.Key, t.Effect,
			h.Since.UTC().Format(time.RFC3339))
		return h
	}
	var why []string
	if node.Spec.Unschedulable {
		why = append(why, "cordoned")
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectNoSchedule && blocks(t, tolerations) {
			why = append(why, fmt.Sprintf("tainted %s:%s", t.Key, t.Effect))
		}
	}
	if len(why) > 0 {
		h.State, h.Detail = StateUnschedulable, "is ready but "+strings.Join(why, ", ")
	}
	return h
}

// evictingTaint is the NoExecute taint of node that the step does not tolerate and that was
// added first (one without timeAdded counts as the oldest); nil when there is none.
func evictingTaint(node *corev1.Node, tolerations []corev1.Toleration) *corev1.Taint {
	var found *corev1.Taint
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoExecute || !blocks(t, tolerations) {
			continue
		}
		if found == nil || addedBefore(t, found) {
			found = t
		}
	}
	return found
}

// addedBefore reports whether taint a was added before b; a taint without timeAdded comes first.
func addedBefore(a, b *corev1.Taint) bool {
	switch {
	case a.TimeAdded == nil:
		return b.TimeAdded != nil
	case b.TimeAdded == nil:
		return false
	}
	return a.TimeAdded.Before(b.TimeAdded)
}

// blocks reports whether taint keeps pods with tolerations off the node. The lifecycle
// controller's own taints are left to the Ready condition.
func blocks(taint *corev1.Taint, tolerations []corev1.Toleration) bool {
	if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
		return false
	}
	if slices.Contains(lifecycleTaints, taint.Key) {
		return false
	}
	for i := range tolerations {
		// As the scheduler matches them, without the alpha comparison operators (Lt, Gt).
		if tolerations[i].ToleratesTaint(logr.Discard(), taint, false) {
			return false
		}
	}
	return true
}

// ReadyCondition is node's Ready condition; nil when it never reported one.
func ReadyCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}
