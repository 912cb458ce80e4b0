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
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
)

// placeStep decides the node step i is pinned to. Everything comes from the world: the node
// each candidate location names (nodes.Resolve), the current node from the node affinity of
// the live Deployment, the timers from the Ready conditions of the nodes. It reports a step
// whose node is missing, ambiguous or not ready, and asks for a pass when a timer expires.
func (r *Reconciler) placeStep(ctx context.Context, s *scope, i int) (status.Placement, error) {
	p := s.pipeline
	step := &p.Spec.Steps[i]
	candidates := step.Locations()
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
		health[c] = nodes.Classify(res.Node, step.Tolerations)
	}
	current, err := currentLocation(ctx, r.Client, p, i, candidates, resolved)
	if err != nil {
		return status.Placement{}, err
	}
	policy, now := failoverPolicy(p), r.now()
	d := nodes.Decide(candidates, current, health, policy, now)
	if d.Moved() {
		// The cache may not show an earlier move of the step yet: a move is decided, and later
		// recorded, on the node the apiserver's Deployment is pinned to.
		live, err := currentLocation(ctx, r.APIReader, p, i, candidates, resolved)
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
	if pr := placementProblem(p, i, pl, candidates, policy.After, resolved[d.Node]); pr.Message != "" {
		s.add(pr)
	}
	// A candidate the step does not run on that names several nodes: nothing stops now, but the
	// step could not move there.
	for _, c := range candidates {
		if msg := resolved[c].AmbiguousMessage(); c != d.Node && msg != "" {
			s.add(problem.Problem{Reason: pipelinev1beta1.ReasonNodeAmbiguous, Notice: true,
				Message: fmt.Sprintf("%s: %s", resources.StepLabel(p, i), msg)})
		}
	}
	return pl, nil
}

// currentLocation is the candidate whose node the Deployment of step i, as c reads it, is
// pinned to (resolved holds the node of every candidate); the node's name itself when no
// candidate names it; empty when the Deployment does not exist (yet) or is not the Pipeline's.
// A Deployment of an earlier version of the operator is pinned by the hostname label, whose
// value is a location.
func currentLocation(ctx context.Context, c client.Reader, p *pipelinev1beta1.Pipeline, i int,
	candidates []string, resolved map[string]nodes.Resolution) (string, error) {
	d := &appsv1.Deployment{}
	err := c.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: resources.StepObjectName(p, i)}, d)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("get deployment %s: %w", resources.StepObjectName(p, i), err)
	case !resources.OwnedBy(p, d):
		return "", nil
	}
	pinned := resources.PinnedNode(&d.Spec.Template.Spec)
	if pinned == "" {
		return "", nil
	}
	for _, cand := range candidates {
		if resolved[cand].Name == pinned || cand == pinned {
			return cand, nil
		}
	}
	return pinned, nil
}

// failoverPolicy is the placement policy of p's spec.failover.
func failoverPolicy(p *pipelinev1beta1.Pipeline) nodes.Policy {
	f := p.Spec.Failover
	back := f.EffectiveFailback()
	return nodes.Policy{
		After:         time.Duration(f.EffectiveAfterSeconds()) * time.Second,
		FailbackAfter: time.Duration(f.EffectiveFailbackAfterSeconds()) * time.Second,
		Failback:      back == pipelinev1beta1.FailbackAutomatic,
		FailbackNow:   back == pipelinev1beta1.FailbackManual && p.Annotations[pipelinev1beta1.FailbackAnnotation] == "true",
	}
}

// placementProblem is the Degraded problem of step i when the node it is pinned to is missing,
// ambiguous (res, the resolution of its location, names several nodes) or not ready; none
// (an empty message) when it is fine. after is spec.failover.afterSeconds. The message names
// times, not durations, so that it stays the same from one pass to the next while nothing
// changes.
func placementProblem(p *pipelinev1beta1.Pipeline, i int, pl status.Placement, candidates []string, after time.Duration,
	res nodes.Resolution) problem.Problem {
	d, h := pl.Decision, pl.Health
	if h.Schedulable() {
		return problem.Problem{}
	}
	label := resources.StepLabel(p, i)
	if h.State == nodes.StateMissing {
		pr := problem.Problem{Reason: pipelinev1beta1.ReasonNodeNotFound, Message: fmt.Sprintf(
			"%s: node %s does not exist (no node is named %s or has %s=%s)", label, d.Node, d.Node, corev1.LabelHostname, d.Node)}
		if msg := res.AmbiguousMessage(); msg != "" {
			pr = problem.Problem{Reason: pipelinev1beta1.ReasonNodeAmbiguous, Message: fmt.Sprintf("%s: %s", label, msg)}
		}
		if len(candidates) > 1 {
			pr.Message += fmt.Sprintf("; none of its nodes (%s) is ready: the step stays", strings.Join(candidates, ", "))
		}
		return pr
	}
	msg := fmt.Sprintf("%s: node %s %s", label, d.Node, h.Detail)
	switch {
	case d.Move == nodes.MoveWaiting && len(candidates) > 1:
		msg += fmt.Sprintf("; the step fails over at %s if it stays so", h.Since.Add(after).UTC().Format(time.RFC3339))
	case d.Move == nodes.MoveNoNodeReady:
		msg += fmt.Sprintf("; none of its nodes (%s) is ready: the step stays on %s", strings.Join(candidates, ", "), d.Node)
	case h.State == nodes.StateUnschedulable:
		msg += ": its running pods stay, new ones cannot be scheduled there"
	case len(candidates) == 1:
		msg += ": the step has no fallbackLocations to move to"
	}
	// A cordoned node still runs the step's pods: the Pipeline is degraded, not failed.
	return problem.Problem{Reason: pipelinev1beta1.ReasonNodeNotReady, Message: msg, Notice: h.State == nodes.StateUnschedulable}
}

// recordMove records the move of step i to another node, once its Deployment, which ran on
// another node, was written there: an event, and for a failover the failover counter.
func (r *Reconciler) recordMove(s *scope, i int, d *appsv1.Deployment, pl status.Placement) {
	p := s.pipeline
	dec := pl.Decision
	label := fmt.Sprintf("Step %d (%s)", i+1, resources.StepName(p, i))
	switch {
	case dec.Move == nodes.MoveFailback:
		r.Recorder.Eventf(p, d, corev1.EventTypeNormal, pipelinev1beta1.EventFailedBack, "Failback",
			"%s moved back from node %s to node %s, which is ready", label, dec.From, dec.Node)
		return
	case dec.Move == nodes.MoveRelocate:
		r.Recorder.Eventf(p, d, corev1.EventTypeNormal, pipelinev1beta1.EventRelocated, "Relocate",
			"%s moved from node %s, which its location and fallbackLocations no longer name, to node %s", label, dec.From, dec.Node)
		return
	case pl.From.State == nodes.StateMissing:
		r.Recorder.Eventf(p, d, corev1.EventTypeWarning, pipelinev1beta1.EventFailedOver, "Failover",
			"%s moved from node %s, which does not exist, to node %s", label, dec.From, dec.Node)
	default:
		r.Recorder.Eventf(p, d, corev1.EventTypeWarning, pipelinev1beta1.EventFailedOver, "Failover",
			"%s moved from node %s, not ready for %ds or more, to node %s", label, dec.From,
			p.Spec.Failover.EffectiveAfterSeconds(), dec.Node)
	}
	r.Metrics.ObserveFailover(p, resources.StepName(p, i))
}

// consumeFailback removes the one-shot failback annotation of p once a pass has placed every
// step with it (the steps whose more preferred node was ready moved back): left on, it would
// send the steps back at once after every later failover. The removal carries p's
// resourceVersion; a conflict runs the pass again.
func (r *Reconciler) consumeFailback(ctx context.Context, p *pipelinev1beta1.Pipeline) error {
	if !failoverPolicy(p).FailbackNow {
		return nil
	}
	if err := r.patchLocked(ctx, p, func(p *pipelinev1beta1.Pipeline) {
		delete(p.Annotations, pipelinev1beta1.FailbackAnnotation)
	}); err != nil {
		return fmt.Errorf("remove annotation %s: %w", pipelinev1beta1.FailbackAnnotation, err)
	}
	return nil
}
