package plugin

import (
	"context"
	"fmt"
	"io"
)

// Action is what pause, resume and failback ask of the operator.
type Action string

// The actions.
const (
	ActionPause    Action = "pause"
	ActionResume   Action = "resume"
	ActionFailback Action = "failback"
)

// The merge patches of each action. In v1 they are README's commands (Pausing and failing
// back): spec.paused, spec.failover.failbackNow, and resume also removes v1beta1's annotation,
// which the operator honours on the v1 object too. In v1beta1 they are the annotations that
// version (and the operator 0.1.0, which serves only it) reads.
var patches = map[string]map[Action]string{
	VersionV1: {
		ActionPause:    `{"spec":{"paused":true}}`,
		ActionResume:   `{"spec":{"paused":null},"metadata":{"annotations":{"` + PausedAnnotation + `":null}}}`,
		ActionFailback: `{"spec":{"failover":{"failbackNow":true}}}`,
	},
	VersionV1beta1: {
		ActionPause:    `{"metadata":{"annotations":{"` + PausedAnnotation + `":"true"}}}`,
		ActionResume:   `{"metadata":{"annotations":{"` + PausedAnnotation + `":null}}}`,
		ActionFailback: `{"metadata":{"annotations":{"` + FailbackAnnotation + `":"true"}}}`,
	},
}

// Patch is the JSON merge patch of action on a Pipeline of version.
func Patch(action Action, version string) (string, error) {
	p, ok := patches[version][action]
	if !ok {
		return "", fmt.Errorf("no %s patch for pipelines of version %q", action, version)
	}
	return p, nil
}

// Do applies action to the Pipeline namespace/name and writes what it did to out. It reads the
// Pipeline first: one that does not exist is an error, one already paused (resumed, with a
// failback requested) is left as it is and said so, and a failback of a Pipeline whose failback
// is Automatic is refused (the operator would ignore the request).
func (s *Server) Do(ctx context.Context, out io.Writer, action Action, namespace, name string) error {
	p, err := s.Pipeline(ctx, namespace, name)
	if err != nil {
		return err
	}
	ref := fmt.Sprintf("pipeline %s/%s", namespace, name)
	var done string
	switch action {
	case ActionPause:
		if p.Paused {
			_, err := fmt.Fprintf(out, "%s is already paused (by %s)\n", ref, p.PausedBy)
			return err
		}
		done = "paused: the operator leaves its children as they are until it is resumed"
	case ActionResume:
		if !p.Paused {
			_, err := fmt.Fprintf(out, "%s is not paused: nothing to resume\n", ref)
			return err
		}
		done = "resumed (was paused by " + p.PausedBy + ")"
	case ActionFailback:
		if p.Failover.Failback != "Manual" {
			return fmt.Errorf("%s: spec.failover.failback is %s: steps return to their nodes by themselves once ready for %ds; a manual failback applies to failback Manual only",
				ref, p.Failover.Failback, p.Failover.FailbackAfterSeconds)
		}
		if p.Failover.FailbackRequested {
			_, err := fmt.Fprintf(out, "%s: a failback is already requested; the operator clears the request once it has placed every step\n", ref)
			return err
		}
		done = "failback requested: every step (and the router) on a fallback node returns to its most preferred ready node"
		if !onFallback(p) {
			done += " (the status shows none on a fallback node now)"
		}
	default:
		return fmt.Errorf("unknown action %q", action)
	}
	patch, err := Patch(action, s.Version)
	if err != nil {
		return err
	}
	c, err := s.client(namespace)
	if err != nil {
		return err
	}
	if err := c.patch(ctx, name, []byte(patch)); err != nil {
		return fmt.Errorf("%s %s: %w", action, ref, err)
	}
	_, err = fmt.Fprintf(out, "%s %s\n  merge patch of pipelines.%s.%s: %s\n", ref, done, s.Version, Group, patch)
	return err
}

// onFallback says whether a step or the router of p runs on a fallback node.
func onFallback(p Pipeline) bool {
	for _, s := range p.Steps {
		if s.OnFallback {
			return true
		}
	}
	return p.Router != nil && p.Router.OnFallback
}
