package plugin

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// ANSI colours of the tree.
const (
	colorReset  = "\x1b[0m"
	colorRed    = "\x1b[31m"
	colorGreen  = "\x1b[32m"
	colorYellow = "\x1b[33m"
	colorBold   = "\x1b[1m"
)

// RenderOptions say how the tree is printed.
type RenderOptions struct {
	// Color colours the phase and the readiness (green good, yellow waiting, red wrong).
	Color bool
	// Now is the time "ago" is counted from.
	Now time.Time
}

// Render writes the tree of every Pipeline in items, one after another, separated by a blank
// line. Every string of a Pipeline is written escaped (Printable).
func Render(w io.Writer, items []Pipeline, o RenderOptions) error {
	var b strings.Builder
	for i, p := range items {
		if i > 0 {
			b.WriteString("\n")
		}
		renderPipeline(&b, printablePipeline(p), o)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// node is one line of the tree and the lines under it.
type node struct {
	text     string
	children []node
}

func renderPipeline(b *strings.Builder, p Pipeline, o RenderOptions) {
	c := painter(o.Color)
	var top []node
	if len(p.Conditions) > 0 {
		top = append(top, conditionsNode(c, p.Conditions))
	}
	if p.Paused {
		top = append(top, node{text: c(colorYellow, "paused by "+p.PausedBy) + ": children are neither repaired nor updated (kubectl pipeline resume " + p.Name + ")"})
	}
	if p.URL != "" {
		top = append(top, node{text: "url  " + p.URL})
	}
	if hasFallbacks(p) {
		top = append(top, failoverNode(c, p.Failover))
	}
	var steps []node
	for i, s := range p.Steps {
		steps = append(steps, stepNode(c, i, s, o.Now))
	}
	top = append(top, node{text: "steps", children: steps})
	if p.Router != nil {
		r := p.Router
		text := "router  " + stateText(c, r.State, "")
		if where := placementText(c, r.Placement); where != "" {
			text += "  " + where
		}
		top = append(top, node{text: text, children: fallbackNodes(c, r.Placement, o.Now)})
	}

	b.WriteString(headLine(c, p) + "\n")
	writeNodes(b, top, "")
}

// headLine is the first line of p's tree: its name, phase, steps ready, whether it is paused,
// the version read and the generations while they differ.
func headLine(c func(string, string) string, p Pipeline) string {
	head := c(colorBold, p.Namespace+"/"+p.Name)
	if p.Phase != "" {
		head += "  " + c(stateColor(p.Phase), p.Phase)
	} else {
		head += "  " + c(colorYellow, "(no status yet)")
	}
	if p.TotalSteps != nil {
		ready := int32(0)
		if p.ReadySteps != nil {
			ready = *p.ReadySteps
		}
		col := colorGreen
		if ready < *p.TotalSteps {
			col = colorYellow
		}
		head += "  " + c(col, fmt.Sprintf("%d/%d steps ready", ready, *p.TotalSteps))
	}
	if p.Paused {
		head += "  " + c(colorYellow, "PAUSED")
	}
	head += fmt.Sprintf("  (%s", p.ServedVersion)
	if p.ObservedGeneration != p.Generation {
		head += fmt.Sprintf(", generation %d, observed %d", p.Generation, p.ObservedGeneration)
	}
	return head + ")"
}

// conditionsNode is every condition as Type=Status, and under it the reason and message of each
// that is not as it is when all is well.
func conditionsNode(c func(string, string) string, conditions []Condition) node {
	var summary []string
	var problems []node
	for _, cond := range conditions {
		good := conditionGood(cond)
		col := colorGreen
		switch {
		case good:
		case cond.Status == "True" && (cond.Type == "Progressing" || cond.Type == "Reconciling"),
			cond.Status != "True" && (cond.Type == "Available" || cond.Type == "Ready"):
			col = colorYellow // waiting, not wrong
		default:
			col = colorRed
		}
		summary = append(summary, c(col, cond.Type+"="+cond.Status))
		if !good && (cond.Reason != "" || cond.Message != "") {
			problems = append(problems, node{text: fmt.Sprintf("%s: %s", cond.Type, joinNonEmpty(": ", cond.Reason, cond.Message))})
		}
	}
	return node{text: "conditions  " + strings.Join(summary, " "), children: problems}
}

// failoverNode is the failover policy, and whether a failback is requested.
func failoverNode(c func(string, string) string, f Failover) node {
	text := fmt.Sprintf("failover  failback %s (after %ds not ready; back after %ds ready)", f.Failback, f.AfterSeconds, f.FailbackAfterSeconds)
	if f.Failback == "Manual" {
		text = fmt.Sprintf("failover  failback Manual (after %ds not ready; back on request)", f.AfterSeconds)
	}
	if f.FailbackRequested {
		text += "  " + c(colorYellow, "failback requested")
	}
	return node{text: text}
}

func stepNode(c func(string, string) string, i int, s Step, now time.Time) node {
	text := fmt.Sprintf("%d %s  ", i+1, s.Name)
	// v1 says whether the step serves; v1beta1 only how its Deployment is.
	if s.State != "" {
		text += stateText(c, s.State, "")
	} else {
		text += stateText(c, s.DeploymentState, "deployment ")
	}
	if s.Replicas != nil || s.ReadyReplicas != nil {
		ready, want := int32(0), int32(0)
		if s.ReadyReplicas != nil {
			ready = *s.ReadyReplicas
		}
		if s.Replicas != nil {
			want = *s.Replicas
		}
		col := colorGreen
		if ready < want {
			col = colorYellow
		}
		text += "  " + c(col, fmt.Sprintf("%d/%d ready", ready, want))
	}
	if where := placementText(c, s.Placement); where != "" {
		text += "  " + where
	}
	children := fallbackNodes(c, s.Placement, now)
	if s.State != "" && s.State != "Ready" && (s.Reason != "" || s.Message != "") {
		children = append(children, node{text: joinNonEmpty(": ", s.Reason, s.Message)})
	}
	return node{text: text, children: children}
}

// placementText is "node N (ready)" or "node N (not ready)"; empty for what is not pinned.
func placementText(c func(string, string) string, pl Placement) string {
	if pl.Node == "" {
		if pl.Location != "" {
			return "location " + pl.Location
		}
		return ""
	}
	text := "node " + pl.Node
	switch {
	case pl.NodeReady == nil:
	case *pl.NodeReady:
		text += " " + c(colorGreen, "(ready)")
	default:
		text += " " + c(colorRed, "(not ready)")
	}
	return text
}

// fallbackNodes says when pl runs on a fallback node: since when, and where it belongs.
func fallbackNodes(c func(string, string) string, pl Placement, now time.Time) []node {
	if !pl.OnFallback {
		return nil
	}
	text := c(colorYellow, "on fallback node "+pl.Node) + ", location " + pl.Location
	if pl.FallbackSince != nil {
		text += fmt.Sprintf(", since %s (%s ago)", pl.FallbackSince.UTC().Format(time.RFC3339), now.Sub(*pl.FallbackSince).Round(time.Second))
	} else {
		text += ", since: unknown (the cluster keeps no event of the move)"
	}
	return []node{{text: text}}
}

// stateText is the state s, coloured by what it means.
func stateText(c func(string, string) string, s, prefix string) string {
	if s == "" {
		return c(colorYellow, "(not reported)")
	}
	return c(stateColor(s), prefix+s)
}

func stateColor(s string) string {
	switch s {
	case "Ready", "Available", "Running":
		return colorGreen
	case "Failed":
		return colorRed
	default:
		return colorYellow
	}
}

// conditionGood says whether cond is as it is when all is well: Degraded, Stalled and
// Reconciling False, Progressing False with RolloutComplete (True is a rollout under way,
// RolloutFailed a stopped one), the others True.
func conditionGood(cond Condition) bool {
	switch cond.Type {
	case "Degraded", "Stalled", "Reconciling":
		return cond.Status == "False"
	case "Progressing":
		return cond.Status == "False" && cond.Reason != "RolloutFailed"
	}
	return cond.Status == "True"
}

func hasFallbacks(p Pipeline) bool {
	for _, s := range p.Steps {
		if len(s.FallbackLocations) > 0 {
			return true
		}
	}
	return p.Router != nil && len(p.Router.FallbackLocations) > 0
}

func writeNodes(b *strings.Builder, nodes []node, indent string) {
	for i, n := range nodes {
		branch, next := "├── ", "│   "
		if i == len(nodes)-1 {
			branch, next = "└── ", "    "
		}
		b.WriteString(indent + branch + n.text + "\n")
		writeNodes(b, n.children, indent+next)
	}
}

// painter colours text when on is true.
func painter(on bool) func(color, text string) string {
	return func(color, text string) string {
		if !on {
			return text
		}
		return color + text + colorReset
	}
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
