package status

import (
	"cmp"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// Placement is where one step, or the router, runs and how its node stands, as one pass
// decided it.
type Placement struct {
	// Decision is where the step's Deployment is pinned; Node is empty for a step without location.
	Decision nodes.Decision
	// NodeName is the name of the node Decision.Node resolves to (see nodes.Resolve), which the
	// step's pods are pinned to by name.
	NodeName string
	// Health is the health of decision.Node.
	Health nodes.Health
	// From is the health of decision.From, when it is one of the step's nodes.
	From nodes.Health
	// Moved is true when this pass wrote the Deployment, which ran on another node, to
	// decision.Node.
	Moved bool
}

// setPlacementStatus writes the node of every step, and of the router (router), into st, and
// marks the Progressing condition while a step or the router moves: one moved this pass, or
// pinned to a fallback node and not available yet, is failing over; one moved back this pass
// is failing back.
func setPlacementStatus(st *pipelinev1.PipelineStatus, p *pipelinev1.Pipeline, placements []Placement, router Placement) {
	var m moves
	for i, pl := range placements {
		if i >= len(st.Steps) || pl.Decision.Node == "" {
			continue
		}
		step := &st.Steps[i]
		step.Node = pl.Decision.Node
		step.NodeReady = ptr.To(pl.Health.Schedulable())
		if step.DeploymentState != pipelinev1.DeploymentStateAvailable {
			m.add(resources.StepLabel(p, i), p.Spec.Steps[i].Location, pl)
		}
	}
	if router.Decision.Node != "" && st.RouterState != "" {
		st.RouterNode = router.Decision.Node
		st.RouterNodeReady = ptr.To(router.Health.Schedulable())
		if st.RouterState != pipelinev1.DeploymentStateAvailable {
			m.add("the router", routerLocation(p), router)
		}
	}
	if m.reason == "" {
		return
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type == pipelinev1.ConditionProgressing && c.Status == metav1.ConditionTrue {
			c.Reason, c.Message = m.reason, problem.JoinMessages(append(m.messages, c.Message))
		}
	}
}

// routerLocation is dataPath.router.location of p; empty without one.
func routerLocation(p *pipelinev1.Pipeline) string {
	if r := p.Spec.RouterSettings(); r != nil {
		return r.Location
	}
	return ""
}

// moves are the steps, and the router, that move between nodes and are not available yet: the
// reason of the Progressing condition and what its message says of each.
type moves struct {
	reason   string
	messages []string
}

// add records the move of what label names, whose location is location, placed as pl says;
// nothing when it does not move.
func (m *moves) add(label, location string, pl Placement) {
	d := pl.Decision
	switch {
	case pl.Moved && d.Move == nodes.MoveFailback:
		m.reason = cmp.Or(m.reason, pipelinev1.ReasonFailingBack)
		m.messages = append(m.messages, fmt.Sprintf("%s is moving back from node %s to node %s", label, d.From, d.Node))
	case pl.Moved && d.Move == nodes.MoveRelocate && d.Node == location:
		m.reason = cmp.Or(m.reason, pipelinev1.ReasonRollingOut)
		m.messages = append(m.messages, fmt.Sprintf("%s is moving from node %s to node %s", label, d.From, d.Node))
	case pl.Moved || d.Node != location:
		m.reason = pipelinev1.ReasonFailingOver
		m.messages = append(m.messages, fmt.Sprintf("%s is moving to fallback node %s", label, d.Node))
	}
}
