package plugin

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// The API versions of the Pipeline the plugin reads and writes.
const (
	VersionV1      = "v1"
	VersionV1beta1 = "v1beta1"
)

// Group is the Pipeline's API group.
const Group = "distri-infer.ndsl.cn"

// The annotations of v1beta1 that v1 turned into fields: "true" asks for a pause, and for a
// manual failback. The operator 0.1.0, which serves only v1beta1, reads them alone; later
// operators honour them on either version.
const (
	PausedAnnotation   = pipelinev1.PausedAnnotation
	FailbackAnnotation = pipelinev1.FailbackAnnotation
)

// FromV1 maps a Pipeline read in v1 onto the summary.
func FromV1(p *pipelinev1.Pipeline) Pipeline {
	return summary(p, p.Annotations, VersionV1)
}

// summary is the summary of p, read in version with annotations (those of the object as read,
// before any conversion).
func summary(p *pipelinev1.Pipeline, annotations map[string]string, version string) Pipeline {
	st := &p.Status
	out := Pipeline{
		Namespace:          p.Namespace,
		Name:               p.Name,
		ServedVersion:      version,
		Phase:              string(st.Phase),
		Generation:         p.Generation,
		ObservedGeneration: st.ObservedGeneration,
		ReadySteps:         st.ReadySteps,
		TotalSteps:         st.TotalSteps,
		URL:                st.URL,
		OperatorVersion:    st.OperatorVersion,
		Failover:           failoverOf(p, annotations, version),
		Steps:              stepsOf(p),
	}
	out.Paused, out.PausedBy = pausedOf(p, annotations, version)
	for _, c := range st.Conditions {
		out.Conditions = append(out.Conditions, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason,
			Message: c.Message, LastTransitionTime: timeOf(c.LastTransitionTime)})
	}
	if p.Spec.RouterEnabled() || st.RouterState != "" {
		var loc string
		var fallbacks []string
		if rt := p.Spec.RouterSettings(); rt != nil {
			loc, fallbacks = rt.Location, rt.FallbackLocations
		}
		out.Router = &Router{State: string(st.RouterState), Placement: placementOf(loc, fallbacks, st.RouterNode, st.RouterNodeReady)}
	}
	return out
}

// pausedOf says whether p is paused, and by what: spec.paused (v1), or the annotation (both;
// annotations are those of the object as read, before any conversion).
func pausedOf(p *pipelinev1.Pipeline, annotations map[string]string, version string) (bool, string) {
	switch {
	case version == VersionV1 && p.Spec.Paused != nil && *p.Spec.Paused:
		return true, "spec.paused"
	case annotations[PausedAnnotation] == "true":
		return true, "annotation " + PausedAnnotation
	}
	return false, ""
}

// stepsOf is the summary of every step of p's spec, with its status (in spec order; a step the
// operator has not reported yet, a new one, has only its spec).
func stepsOf(p *pipelinev1.Pipeline) []Step {
	var out []Step
	for i, s := range p.Spec.Steps {
		var st pipelinev1.StepStatus
		if i < len(p.Status.Steps) {
			st = p.Status.Steps[i]
		}
		name := firstOf(s.Name, st.Name)
		if name == "" {
			name = fmt.Sprintf("step-%d", i+1) // v1beta1's name of an unnamed step
		}
		out = append(out, Step{
			Name:            name,
			Deployment:      st.DeploymentName,
			Placement:       placementOf(s.Location, s.FallbackLocations, st.Node, st.NodeReady),
			Replicas:        st.Replicas,
			ReadyReplicas:   st.ReadyReplicas,
			State:           string(st.State),
			Reason:          st.Reason,
			Message:         st.Message,
			DeploymentState: string(st.DeploymentState),
			ServiceState:    string(st.ServiceState),
			URL:             st.URL,
		})
	}
	return out
}

// failoverOf is p's spec.failover with its defaults, and whether a manual failback is
// requested: failbackNow (v1), or the annotation (both).
func failoverOf(p *pipelinev1.Pipeline, annotations map[string]string, version string) Failover {
	f := p.Spec.Failover
	return Failover{
		Failback:             string(f.EffectiveFailback()),
		AfterSeconds:         f.EffectiveAfterSeconds(),
		FailbackAfterSeconds: f.EffectiveFailbackAfterSeconds(),
		FailbackRequested: (version == VersionV1 && f != nil && f.FailbackNow != nil && *f.FailbackNow) ||
			annotations[FailbackAnnotation] == "true",
	}
}

// placementOf is where a step or the router with location and fallbacks runs, node being what
// the status reports.
func placementOf(location string, fallbacks []string, node string, nodeReady *bool) Placement {
	return Placement{
		Location:          location,
		FallbackLocations: fallbacks,
		Node:              node,
		NodeReady:         nodeReady,
		OnFallback:        node != "" && location != "" && node != location && slices.Contains(fallbacks, node),
	}
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// timeOf is t, nil when it is not set.
func timeOf(t metav1.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t.Time
}
