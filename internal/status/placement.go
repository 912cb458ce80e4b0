package status

import (
	"cmp"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// Placement is where one step runs and how its node stands, as one pass decided it.
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

// setPlacementStatus writes the node of every step into st, and marks the Progressing
// condition while a step moves: a step moved this pass, or pinned to a fallback node and not
// available yet, is failing over; one moved back this pass is failing back.
func setPlacementStatus(st *pipelinev1beta1.PipelineStatus, p *pipelinev1beta1.Pipeline, placements []Placement) {
	reason, moving := "", []string(nil)
	for i, pl := range placements {
		if i >= len(st.DetailPhase.StepsPhase) || pl.Decision.Node == "" {
			continue
		}
		step := &st.DetailPhase.StepsPhase[i]
		step.Node = pl.Decision.Node
		step.NodeReady = ptr.To(pl.Health.Schedulable())
		if step.DeploymentPhase == pipelinev1beta1.DeploymentPhaseAvailable {
			continue
		}
		label := resources.StepLabel(p, i)
		switch {
		case pl.Moved && pl.Decision.Move == nodes.MoveFailback:
			reason = cmp.Or(reason, pipelinev1beta1.ReasonFailingBack)
			moving = append(moving, fmt.Sprintf("%s is moving back from node %s to node %s", label, pl.Decision.From, pl.Decision.Node))
		case pl.Moved && pl.Decision.Move == nodes.MoveRelocate && pl.Decision.Node == p.Spec.Steps[i].Location:
			reason = cmp.Or(reason, pipelinev1beta1.ReasonRollingOut)
			moving = append(moving, fmt.Sprintf("%s is moving from node %s to node %s", label, pl.Decision.From, pl.Decision.Node))
		case pl.Moved || pl.Decision.Node != p.Spec.Steps[i].Location:
			reason = pipelinev1beta1.ReasonFailingOver
			moving = append(moving, fmt.Sprintf("%s is moving to fallback node %s", label, pl.Decision.Node))
		}
	}
	if reason == "" {
		return
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type == pipelinev1beta1.ConditionProgressing && c.Status == metav1.ConditionTrue {
			c.Reason, c.Message = reason, problem.JoinMessages(append(moving, c.Message))
		}
	}
}
