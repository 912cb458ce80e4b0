package plugin

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// The reasons of the events the operator records on a Pipeline when it moves a step, or the
// router, to another node (pipelinev1.EventFailedOver, EventRelocated).
const (
	eventFailedOver = "FailedOver"
	eventRelocated  = "Relocated"
)

// AddFallbackSince sets FallbackSince of every step and router of p that runs on a fallback
// node, from the operator's events about p: the time of the latest FailedOver or Relocated
// event that moved it to its node. Events expire (an hour by default) and reading them may be
// forbidden: then FallbackSince stays nil. It reads events only when something is on a
// fallback node.
func (s *Server) AddFallbackSince(ctx context.Context, p *Pipeline) {
	if !onFallback(*p) {
		return
	}
	sel := fields.Set{"involvedObject.kind": "Pipeline", "involvedObject.name": p.Name}.AsSelector().String()
	list, err := s.Core.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return
	}
	SetFallbackSince(p, list.Items)
}

// SetFallbackSince sets FallbackSince of every step and router of p on a fallback node from
// events, the events of p.
func SetFallbackSince(p *Pipeline, events []corev1.Event) {
	for i := range p.Steps {
		st := &p.Steps[i]
		if !st.OnFallback {
			continue
		}
		// The operator names the step "Step <n> (<name>)" in the event, whose related object
		// is the step's Deployment.
		prefix := fmt.Sprintf("Step %d (%s) ", i+1, st.Name)
		st.FallbackSince = latestMove(events, st.Node, func(e corev1.Event) bool {
			return (e.Related != nil && e.Related.Kind == "Deployment" && st.Deployment != "" && e.Related.Name == st.Deployment) ||
				strings.HasPrefix(e.Message, prefix)
		})
	}
	if r := p.Router; r != nil && r.OnFallback {
		r.FallbackSince = latestMove(events, r.Node, func(e corev1.Event) bool { return strings.HasPrefix(e.Message, "Router ") })
	}
}

// latestMove is the time of the latest FailedOver or Relocated event of events that is about
// it and moved it to node.
func latestMove(events []corev1.Event, node string, about func(corev1.Event) bool) *time.Time {
	var latest *time.Time
	for _, e := range events {
		if (e.Reason != eventFailedOver && e.Reason != eventRelocated) || !about(e) ||
			!strings.HasSuffix(strings.TrimSpace(e.Message), "to node "+node) {
			continue
		}
		if t := eventTime(e); !t.IsZero() && (latest == nil || t.After(*latest)) {
			latest = &t
		}
	}
	return latest
}

// eventTime is when e last happened, whichever of its times the recorder set.
func eventTime(e corev1.Event) time.Time {
	var t time.Time
	for _, c := range []time.Time{e.EventTime.Time, e.LastTimestamp.Time, e.FirstTimestamp.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}
