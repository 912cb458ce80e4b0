package pipeline

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
)

// placed is what placement moves between nodes: one step, or the router. Steps and the
// router share spec.failover and one decision (nodes.Decide); placed says what differs.
type placed struct {
	// label names it in conditions ("step 2 (detect)", "router").
	label string
	// noun is what it is ("step", "router").
	noun string
	// metric is the step label of its failover counter: the step's name, or "router".
	metric string
	// candidates are its nodes, most preferred first: location, then fallbackLocations.
	candidates []string
	// tolerations are the taints its pods tolerate.
	tolerations []corev1.Toleration
	// deployment names its Deployment.
	deployment string
	// ours reports whether a Deployment the Pipeline owns of that name is its own (a step named
	// router once had the router's names).
	ours func(*appsv1.Deployment) bool
}

// title names it at the start of an event ("Step 2 (detect)", "Router"): its label, capitalised.
func (w placed) title() string { return strings.ToUpper(w.label[:1]) + w.label[1:] }

// stepPlaced is step i of p, for placement.
func stepPlaced(p *pipelinev1.Pipeline, i int) placed {
	step := &p.Spec.Steps[i]
	return placed{
		label:       resources.StepLabel(p, i),
		noun:        "step",
		metric:      resources.StepName(p, i),
		candidates:  step.Locations(),
		tolerations: step.Tolerations,
		deployment:  resources.StepObjectName(p, i),
		ours:        func(*appsv1.Deployment) bool { return true },
	}
}

// routerPlaced is the router of p, for placement.
func routerPlaced(p *pipelinev1.Pipeline) placed {
	return placed{
		label:      "router",
		noun:       "router",
		metric:     resources.RouterMetricName,
		candidates: p.Spec.RouterSettings().Locations(),
		deployment: resources.RouterObjectName(p),
		ours:       func(d *appsv1.Deployment) bool { return resources.IsRouterObject(d) },
	}
}

// place decides the node what is pinned to. Everything comes from the world: the node each
// candidate location names (nodes.Resolve), the current node from the node affinity of the
// live Deployment, the timers from the Ready conditions of the nodes. It reports a step or
// router whose node is missing, ambiguous or not ready, and asks for a pass when a timer
// expires.
func (r *Reconciler) place(ctx context.Context, s *scope, what placed) (status.Placement, error) {
	p := s.pipeline
	candidates := what.candidates
	if len(candidates) == 0 {
		return status.Placement{}, nil
	}
	resolved := make(map[string]nodes.Resolution, len(candidates))
	health := make(map[string]nodes.Health, len(candidates))
	for _, c := range candidates {
		res, err := nodes.Resolve(ctx, r.Client, c)
		if err != nil {
			return status.Placement{}, err
		}
		resolved[c] = res
		health[c] = nodes.Classify(res.Node, what.tolerations)
	}
	current, err := currentLocation(ctx, r.Client, p, what, resolved)
	if err != nil {
		return status.Placement{}, err
	}
	policy, now := failoverPolicy(p), r.now()
	d := nodes.Decide(candidates, current, health, policy, now)
	if d.Moved() {
		// The cache may not show an earlier move yet: a move is decided, and later recorded, on
		// the node the apiserver's Deployment is pinned to.
		live, err := currentLocation(ctx, r.APIReader, p, what, resolved)
		if err != nil {
			return status.Placement{}, err
		}
		if live != current {
			d = nodes.Decide(candidates, live, health, policy, now)
		}
	}
	if d.RequeueAfter > 0 {
		s.requeueWithin(d.RequeueAfter)
	}
	pl := status.Placement{Decision: d, NodeName: resolved[d.Node].Name, Health: health[d.Node], From: health[d.From]}
	if pr := placementProblem(what, pl, policy.After, resolved[d.Node]); pr.Message != "" {
		s.add(pr)
	}
	// A candidate it does not run on that names several nodes: nothing stops now, but it could
	// not move there.
	for _, c := range candidates {
		if msg := resolved[c].AmbiguousMessage(); c != d.Node && msg != "" {
			s.add(problem.Problem{Reason: pipelinev1.ReasonNodeAmbiguous, Notice: true,
				Message: fmt.Sprintf("%s: %s", what.label, msg)})
		}
	}
	return pl, nil
}

// currentLocation is the candidate of what whose node its Deployment, as c reads it, is pinned
// to (resolved holds the node of every candidate); the node's name itself when no candidate
// names it; empty when the Deployment does not exist (yet) or is not its own.
// A Deployment of an earlier version of the operator is pinned by the hostname label, whose
// value is a location.
func currentLocation(ctx context.Context, c client.Reader, p *pipelinev1.Pipeline, what placed,
	resolved map[string]nodes.Resolution) (string, error) {
	d := &appsv1.Deployment{}
	err := c.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: what.deployment}, d)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("get deployment %s: %w", what.deployment, err)
	case !resources.OwnedBy(p, d) || !what.ours(d):
		return "", nil
	}
	pinned := resources.PinnedNode(&d.Spec.Template.Spec)
	if pinned == "" {
		return "", nil
	}
	for _, cand := range what.candidates {
		if resolved[cand].Name == pinned || cand == pinned {
			return cand, nil
		}
	}
	return pinned, nil
}

// failoverPolicy is the placement policy of p's spec.failover.
func failoverPolicy(p *pipelinev1.Pipeline) nodes.Policy {
	f := p.Spec.Failover
	back := f.EffectiveFailback()
	return nodes.Policy{
		After:         time.Duration(f.EffectiveAfterSeconds()) * time.Second,
		FailbackAfter: time.Duration(f.EffectiveFailbackAfterSeconds()) * time.Second,
		Failback:      back == pipelinev1.FailbackAutomatic,
		FailbackNow:   back == pipelinev1.FailbackManual && p.FailbackRequested(),
	}
}

// placementProblem is the Degraded problem of what when the node it is pinned to is missing,
// ambiguous (res, the resolution of its location, names several nodes) or not ready; none
// (an empty message) when it is fine. after is spec.failover.afterSeconds. The message names
// times, not durations, so that it stays the same from one pass to the next while nothing
// changes.
func placementProblem(what placed, pl status.Placement, after time.Duration, res nodes.Resolution) problem.Problem {
	d, h := pl.Decision, pl.Health
	if h.Schedulable() {
		return problem.Problem{}
	}
	label, candidates := what.label, what.candidates
	if h.State == nodes.StateMissing {
		pr := problem.Problem{Reason: pipelinev1.ReasonNodeNotFound, Message: fmt.Sprintf(
			"%s: node %s does not exist (no node is named %s or has %s=%s)", label, d.Node, d.Node, corev1.LabelHostname, d.Node)}
		if msg := res.AmbiguousMessage(); msg != "" {
			pr = problem.Problem{Reason: pipelinev1.ReasonNodeAmbiguous, Message: fmt.Sprintf("%s: %s", label, msg)}
		}
		if len(candidates) > 1 {
			pr.Message += fmt.Sprintf("; none of its nodes (%s) is ready: the %s stays", strings.Join(candidates, ", "), what.noun)
		}
		return pr
	}
	msg := fmt.Sprintf("%s: node %s %s", label, d.Node, h.Detail)
	switch {
	case d.Move == nodes.MoveWaiting && len(candidates) > 1:
		msg += fmt.Sprintf("; the %s fails over at %s if it stays so", what.noun, h.Since.Add(after).UTC().Format(time.RFC3339))
	case d.Move == nodes.MoveNoNodeReady:
		msg += fmt.Sprintf("; none of its nodes (%s) is ready: the %s stays on %s", strings.Join(candidates, ", "), what.noun, d.Node)
	case h.State == nodes.StateUnschedulable:
		msg += ": its running pods stay, new ones cannot be scheduled there"
	case len(candidates) == 1:
		msg += fmt.Sprintf(": the %s has no fallbackLocations to move to", what.noun)
	}
	// A cordoned node still runs the pods: the Pipeline is degraded, not failed.
	return problem.Problem{Reason: pipelinev1.ReasonNodeNotReady, Message: msg, Notice: h.State == nodes.StateUnschedulable}
}

// recordMove records the move of what to another node, once its Deployment d, which ran on
// another node, was written there: an event, and for a failover the failover counter.
func (r *Reconciler) recordMove(s *scope, what placed, d *appsv1.Deployment, pl status.Placement) {
	p := s.pipeline
	dec := pl.Decision
	switch {
	case dec.Move == nodes.MoveFailback:
		r.Recorder.Eventf(p, d, corev1.EventTypeNormal, pipelinev1.EventFailedBack, "Failback",
			"%s moved back from node %s to node %s, which is ready", what.title(), dec.From, dec.Node)
		return
	case dec.Move == nodes.MoveRelocate:
		r.Recorder.Eventf(p, d, corev1.EventTypeNormal, pipelinev1.EventRelocated, "Relocate",
			"%s moved from node %s, which its location and fallbackLocations no longer name, to node %s", what.title(), dec.From, dec.Node)
		return
	case pl.From.State == nodes.StateMissing:
		r.Recorder.Eventf(p, d, corev1.EventTypeWarning, pipelinev1.EventFailedOver, "Failover",
			"%s moved from node %s, which does not exist, to node %s", what.title(), dec.From, dec.Node)
	default:
		r.Recorder.Eventf(p, d, corev1.EventTypeWarning, pipelinev1.EventFailedOver, "Failover",
			"%s moved from node %s, not ready for %ds or more, to node %s", what.title(), dec.From,
			p.Spec.Failover.EffectiveAfterSeconds(), dec.Node)
	}
	r.Metrics.ObserveFailover(p, what.metric)
}

// applyPlaced applies desired, the Deployment of what pinned as pl says, into d, and records a
// move: a Deployment that ran on another node and was written to this one (not a new
// Deployment, nor one the apiserver already had there) is an event and, for a failover, the
// failover counter. It returns pl with Moved set, and whether d holds the Pipeline's Deployment.
func (r *Reconciler) applyPlaced(ctx context.Context, s *scope, what placed, pl status.Placement, d *appsv1.Deployment,
	desired *appsv1ac.DeploymentApplyConfiguration) (status.Placement, bool, error) {
	res, err := r.applyExistingChild(ctx, s, d, desired)
	if res.Owned && res.Updated && pl.Decision.Moved() {
		pl.Moved = true
		r.recordMove(s, what, d, pl)
	}
	return pl, res.Owned, err
}

// consumeFailback removes the one-shot failback request of p (spec.failover.failbackNow, and the
// annotation v1beta1 spells it with) once a pass has placed every
// step, and the router, with it (those whose more preferred node was ready moved back): left
// on, it would send them back at once after every later failover. The removal carries p's
// resourceVersion; a conflict runs the pass again.
func (r *Reconciler) consumeFailback(ctx context.Context, p *pipelinev1.Pipeline) error {
	if !failoverPolicy(p).FailbackNow {
		return nil
	}
	if err := r.patchLocked(ctx, p, func(p *pipelinev1.Pipeline) {
		if p.Spec.Failover != nil {
			p.Spec.Failover.FailbackNow = nil
		}
		delete(p.Annotations, pipelinev1.FailbackAnnotation)
	}); err != nil {
		return fmt.Errorf("remove spec.failover.failbackNow: %w", err)
	}
	return nil
}
