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

// placeStep decides the node step i is pinned to. Everything comes from the world: the current
// node from the node selector of the live Deployment, the timers from the Ready conditions of
// the nodes. It reports a step whose node is missing or not ready, and asks for a pass when a
// timer expires.
func (r *Reconciler) placeStep(ctx context.Context, s *scope, i int) (status.Placement, error) {
	p := s.pipeline
	step := &p.Spec.Steps[i]
	candidates := step.Locations()
	if len(candidates) == 0 {
		return status.Placement{}, nil
	}
	current, err := currentNode(ctx, r.Client, p, i)
	if err != nil {
		return status.Placement{}, err
	}
	health := make(map[string]nodes.Health, len(candidates))
	for _, c := range candidates {
		n, err := nodes.Lookup(ctx, r.Client, c)
		if err != nil {
			return status.Placement{}, err
		}
		health[c] = nodes.Classify(n, step.Tolerations)
	}
	policy, now := failoverPolicy(p), r.now()
	d := nodes.Decide(candidates, current, health, policy, now)
	if d.Moved() {
		// The cache may not show an earlier move of the step yet: a move is decided, and later
		// recorded, on the node the apiserver's Deployment is pinned to.
		live, err := currentNode(ctx, r.APIReader, p, i)
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
	pl := status.Placement{Decision: d, Health: health[d.Node], From: health[d.From]}
	if msg := placementProblem(p, i, pl, candidates, policy.After); msg != "" {
		reason := pipelinev1beta1.ReasonNodeNotReady
		if pl.Health.State == nodes.StateMissing {
			reason = pipelinev1beta1.ReasonNodeNotFound
		}
		// A cordoned node still runs the step's pods: the Pipeline is degraded, not failed.
		s.add(problem.Problem{Reason: reason, Message: msg, Notice: pl.Health.State == nodes.StateUnschedulable})
	}
	return pl, nil
}

// currentNode is the node the Deployment of step i, as c reads it, is pinned to; empty when it
// does not exist (yet) or is not the Pipeline's.
func currentNode(ctx context.Context, c client.Reader, p *pipelinev1beta1.Pipeline, i int) (string, error) {
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
	return d.Spec.Template.Spec.NodeSelector[corev1.LabelHostname], nil
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

// placementProblem is the Degraded message of step i when the node it is pinned to is missing
// or not ready; empty when it is fine. after is spec.failover.afterSeconds. The message names
// times, not durations, so that it stays the same from one pass to the next while nothing changes.
func placementProblem(p *pipelinev1beta1.Pipeline, i int, pl status.Placement, candidates []string, after time.Duration) string {
	d, h := pl.Decision, pl.Health
	if h.Schedulable() {
		return ""
	}
	label := resources.StepLabel(p, i)
	if h.State == nodes.StateMissing {
		msg := fmt.Sprintf("%s: node %s does not exist (no node has %s=%s)", label, d.Node, corev1.LabelHostname, d.Node)
		if len(candidates) > 1 {
			msg += fmt.Sprintf("; none of its nodes (%s) is ready: the step stays", strings.Join(candidates, ", "))
		}
		return msg
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
	return msg
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
