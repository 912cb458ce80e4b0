package nodes

import (
	"slices"
	"time"
)

// Policy says when a step moves between its nodes.
type Policy struct {
	// After is how long the node a step is pinned to must have been not ready before it moves.
	After time.Duration
	// FailbackAfter is how long a more preferred node must have been ready before the step
	// returns to it.
	FailbackAfter time.Duration
	// Failback lets a step return to a more preferred node by itself (failback Automatic).
	Failback bool
	// FailbackNow returns a step to its most preferred schedulable node without waiting
	// FailbackAfter (failback Manual with the failback annotation).
	FailbackNow bool
}

// Move is what a placement decision does.
type Move string

const (
	// MoveNone keeps the step where it is: its node is ready, or nothing better is.
	MoveNone Move = "None"
	// MoveWaiting keeps the step where it is while its node's outage is shorter than After.
	MoveWaiting Move = "Waiting"
	// MoveFailover moves the step off a node that has been not ready for After.
	MoveFailover Move = "Failover"
	// MoveFailback moves the step back to a more preferred node that is ready again.
	MoveFailback Move = "Failback"
	// MoveNoNodeReady keeps the step where it is: its node has been not ready for After, but no
	// other node of the step is ready either.
	MoveNoNodeReady Move = "NoNodeReady"
	// MoveRelocate moves the step off a node that its location and fallbackLocations no longer
	// name: the spec changed.
	MoveRelocate Move = "Relocate"
)

// Decision is where a step's pods should run.
type Decision struct {
	// Node is the node the step's Deployment should be pinned to.
	Node string
	// From is the node it is pinned to now; empty when it has no Deployment yet.
	From string
	// Move says why Node is what it is.
	Move Move
	// RequeueAfter is when a timer of the decision expires and it must be made again; 0 when
	// only a change of some node can change it.
	RequeueAfter time.Duration
}

// Moved reports whether the decision moves a step that runs somewhere to another node.
func (d Decision) Moved() bool { return d.From != "" && d.Node != d.From }

// Decide places a step. candidates are its nodes, most preferred first (location, then
// fallbackLocations); current is the node its Deployment is pinned to now (empty when it has
// none yet: it starts as if on the location); health holds every candidate (a candidate absent
// from it is missing). It reads no clock but now, and remembers nothing: every timer runs from a
// node's Ready transition time (or the time a NoExecute taint was added), so the same world
// always gives the same decision.
//
// The rules:
//   - A step stays on a node that reports Ready, even when the node is cordoned or has a
//     NoSchedule taint: its running pods are not evicted by that, and a cordon has no time to
//     count from. A NoExecute taint against the step evicts its pods: such a node is not ready.
//   - A step whose node has been not ready (Ready False or Unknown, or never reported, or an
//     untolerated NoExecute taint) for After moves to the first candidate that is ready and
//     schedulable. A node that does not exist has been not ready forever: the step moves at
//     once. A node that flaps never stays down for After in one piece, so the step never moves.
//   - With Failback, a step on a fallback node returns to the most preferred candidate that
//     has been ready and schedulable for FailbackAfter; a flapping node restarts that wait on
//     every flap, so the step does not bounce back to it. When the fallback node itself is not
//     ready, the step returns to such a candidate at once, without waiting After.
//   - A step pinned to a node that is no longer a candidate (the spec changed) moves at once to
//     the first candidate that is ready and schedulable, or to the location when none is.
//   - When no candidate is ready and schedulable, the step stays where it is.
func Decide(candidates []string, current string, health map[string]Health, p Policy, now time.Time) Decision {
	if len(candidates) == 0 {
		return Decision{Node: current, From: current, Move: MoveNone}
	}
	if current != "" && !slices.Contains(candidates, current) {
		return relocate(candidates, current, health)
	}
	from := current
	idx := slices.Index(candidates, current)
	if idx < 0 {
		idx, current = 0, candidates[0]
	}
	stay := Decision{Node: current, From: from, Move: MoveNone}
	h, known := health[current]
	if !known {
		h = Health{State: StateMissing}
	}

	if h.Ready() {
		if idx == 0 || (!p.Failback && !p.FailbackNow) {
			return stay
		}
		back, wait := failbackTarget(candidates[:idx], health, p, now)
		if back != "" {
			return Decision{Node: back, From: from, Move: MoveFailback}
		}
		stay.RequeueAfter = wait
		return stay
	}

	return leave(candidates, idx, from, h, health, p, now)
}

// relocate moves a step off current, a node candidates do not name, to the first schedulable
// candidate, else to the location.
func relocate(candidates []string, current string, health map[string]Health) Decision {
	for _, c := range candidates {
		if health[c].Schedulable() {
			return Decision{Node: c, From: current, Move: MoveRelocate}
		}
	}
	return Decision{Node: candidates[0], From: current, Move: MoveRelocate}
}

// leave decides for a step on candidates[idx], whose health h is not ready; from is the node its
// Deployment is pinned to ("" when it has none yet).
func leave(candidates []string, idx int, from string, h Health, health map[string]Health, p Policy, now time.Time) Decision {
	current := candidates[idx]
	var failbackWait time.Duration
	if (p.Failback || p.FailbackNow) && idx > 0 {
		// The node the step failed over to is down too: a more preferred node that has been
		// ready long enough (any ready one when a failback was asked for) takes it back
		// without the wait for After.
		back, wait := failbackTarget(candidates[:idx], health,
			Policy{FailbackAfter: p.FailbackAfter, FailbackNow: p.FailbackNow}, now)
		if back != "" {
			return Decision{Node: back, From: from, Move: MoveFailback}
		}
		failbackWait = wait
	}
	if h.State != StateMissing {
		if down := now.Sub(h.Since); down < p.After {
			d := Decision{Node: current, From: from, Move: MoveWaiting, RequeueAfter: p.After - down}
			if failbackWait > 0 && failbackWait < d.RequeueAfter {
				d.RequeueAfter = failbackWait
			}
			return d
		}
	}
	for i, c := range candidates {
		if i != idx && health[c].Schedulable() {
			return Decision{Node: c, From: from, Move: MoveFailover}
		}
	}
	return Decision{Node: current, From: from, Move: MoveNoNodeReady}
}

// failbackTarget is the first of preferred that is schedulable and has been ready for
// p.FailbackAfter (at once with p.FailbackNow); else "" and how long until the first
// schedulable one will have been (0 when none is schedulable).
func failbackTarget(preferred []string, health map[string]Health, p Policy, now time.Time) (string, time.Duration) {
	var wait time.Duration
	for _, c := range preferred {
		ch := health[c]
		if !ch.Schedulable() {
			continue
		}
		readyFor := now.Sub(ch.Since)
		if p.FailbackNow || readyFor >= p.FailbackAfter {
			return c, 0
		}
		if w := p.FailbackAfter - readyFor; wait == 0 || w < wait {
			wait = w
		}
	}
	return "", wait
}
