package plugin

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The API versions of the Pipeline the plugin reads and writes.
const (
	VersionV1      = "v1"
	VersionV1beta1 = "v1beta1"
)

// Group is the Pipeline's API group.
const Group = "distri-infer.ndsl.cn"

// The annotations of v1beta1 that v1 turned into fields (pipelinev1.PausedAnnotation and
// FailbackAnnotation): "true" asks for a pause, and for a manual failback. The operator 0.1.0,
// which serves only v1beta1, reads them alone; later operators honour them on either version.
const (
	PausedAnnotation   = Group + "/paused"
	FailbackAnnotation = Group + "/failback"
)

// The defaults of spec.failover, the same in both versions.
const (
	defaultFailback             = "Automatic"
	defaultAfterSeconds         = 60
	defaultFailbackAfterSeconds = 300
)

// condition is a status condition, as both versions write it.
type condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
	LastTransitionTime string `json:"lastTransitionTime"`
}

// failover is spec.failover; v1beta1 has no failbackNow (its annotation says it).
type failover struct {
	AfterSeconds         *int32 `json:"afterSeconds"`
	Failback             string `json:"failback"`
	FailbackAfterSeconds *int32 `json:"failbackAfterSeconds"`
	FailbackNow          *bool  `json:"failbackNow"`
}

// specStep is what the plugin reads of a step of the spec, the same in both versions.
type specStep struct {
	Name              string   `json:"name"`
	Location          string   `json:"location"`
	FallbackLocations []string `json:"fallbackLocations"`
}

// pinned is the location of the router, the same in both versions.
type pinned struct {
	Enabled           bool     `json:"enabled"` // v1beta1 only
	Location          string   `json:"location"`
	FallbackLocations []string `json:"fallbackLocations"`
}

// statusStep is a step of the status: status.steps[] in v1, status.detailPhase.stepsPhase[] in
// v1beta1, whose states are named ...Phase.
type statusStep struct {
	Name            string `json:"name"`
	DeploymentName  string `json:"deploymentName"`
	DeploymentState string `json:"deploymentState"`
	DeploymentPhase string `json:"deploymentPhase"`
	ServiceState    string `json:"serviceState"`
	ServicePhase    string `json:"servicePhase"`
	URL             string `json:"url"`
	Replicas        *int32 `json:"replicas"`
	ReadyReplicas   *int32 `json:"readyReplicas"`
	Node            string `json:"node"`
	NodeReady       *bool  `json:"nodeReady"`
	State           string `json:"state"`
	Reason          string `json:"reason"`
	Message         string `json:"message"`
}

// object is the part of a Pipeline of either version the plugin reads.
type object struct {
	Metadata struct {
		Namespace   string            `json:"namespace"`
		Name        string            `json:"name"`
		Generation  int64             `json:"generation"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Steps    []specStep `json:"steps"`
		Failover *failover  `json:"failover"`
		Paused   *bool      `json:"paused"` // v1
		DataPath *struct {  // v1
			Mode   string  `json:"mode"`
			Router *pinned `json:"router"`
		} `json:"dataPath"`
		Router *pinned `json:"router"` // v1beta1
	} `json:"spec"`
	Status struct {
		Phase              string      `json:"phase"`
		ObservedGeneration int64       `json:"observedGeneration"`
		Conditions         []condition `json:"conditions"`
		URL                string      `json:"url"`
		OperatorVersion    string      `json:"operatorVersion"`
		// v1: counts as numbers, steps and router at the top.
		ReadySteps      json.RawMessage `json:"readySteps"`
		TotalSteps      *int32          `json:"totalSteps"`
		Steps           []statusStep    `json:"steps"`
		RouterState     string          `json:"routerState"`
		RouterNode      string          `json:"routerNode"`
		RouterNodeReady *bool           `json:"routerNodeReady"`
		// v1beta1: readySteps "<ready>/<total>", the rest in detailPhase.
		DetailPhase struct {
			StepsPhase      []statusStep `json:"stepsPhase"`
			RouterPhase     string       `json:"routerPhase"`
			RouterNode      string       `json:"routerNode"`
			RouterNodeReady *bool        `json:"routerNodeReady"`
		} `json:"detailPhase"`
	} `json:"status"`
}

// FromUnstructured maps a Pipeline read in version (VersionV1 or VersionV1beta1) onto the summary.
func FromUnstructured(u *unstructured.Unstructured, version string) (Pipeline, error) {
	if version != VersionV1 && version != VersionV1beta1 {
		return Pipeline{}, fmt.Errorf("pipeline %s/%s: version %q is neither %s nor %s", u.GetNamespace(), u.GetName(), version, VersionV1, VersionV1beta1)
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return Pipeline{}, fmt.Errorf("pipeline %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	var o object
	if err := json.Unmarshal(data, &o); err != nil {
		return Pipeline{}, fmt.Errorf("pipeline %s/%s is not a %s Pipeline: %w", u.GetNamespace(), u.GetName(), version, err)
	}
	p := Pipeline{
		Namespace:          o.Metadata.Namespace,
		Name:               o.Metadata.Name,
		ServedVersion:      version,
		Phase:              pascalCase(o.Status.Phase),
		Generation:         o.Metadata.Generation,
		ObservedGeneration: o.Status.ObservedGeneration,
		URL:                o.Status.URL,
		OperatorVersion:    o.Status.OperatorVersion,
		Failover:           failoverOf(o.Spec.Failover, o.Metadata.Annotations, version),
	}
	p.Paused, p.PausedBy = pausedOf(&o, version)
	for _, c := range o.Status.Conditions {
		p.Conditions = append(p.Conditions, Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
			LastTransitionTime: parseTime(c.LastTransitionTime)})
	}
	v, err := partsOf(&o, version)
	if err != nil {
		return Pipeline{}, fmt.Errorf("pipeline %s/%s: %w", p.Namespace, p.Name, err)
	}
	p.ReadySteps, p.TotalSteps = v.ready, v.total
	p.Steps = stepsOf(o.Spec.Steps, v.steps)
	if v.routerOn || v.routerState != "" {
		var loc string
		var fallbacks []string
		if v.router != nil {
			loc, fallbacks = v.router.Location, v.router.FallbackLocations
		}
		p.Router = &Router{State: v.routerState, Placement: placementOf(loc, fallbacks, v.routerNode, v.routerNodeReady)}
	}
	return p, nil
}

// pausedOf says whether o is paused, and by what: spec.paused (v1), or the annotation (both).
func pausedOf(o *object, version string) (bool, string) {
	switch {
	case version == VersionV1 && o.Spec.Paused != nil && *o.Spec.Paused:
		return true, "spec.paused"
	case o.Metadata.Annotations[PausedAnnotation] == "true":
		return true, "annotation " + PausedAnnotation
	}
	return false, ""
}

// parts are the fields whose place differs between the versions.
type parts struct {
	ready, total    *int32
	steps           []statusStep
	routerOn        bool
	router          *pinned
	routerState     string
	routerNode      string
	routerNodeReady *bool
}

// partsOf reads the fields of o whose place depends on version.
func partsOf(o *object, version string) (parts, error) {
	var v parts
	st := &o.Status
	hasReady := len(st.ReadySteps) > 0 && string(st.ReadySteps) != "null"
	if version == VersionV1 {
		v.total, v.steps = st.TotalSteps, st.Steps
		if hasReady {
			var n int32
			if err := json.Unmarshal(st.ReadySteps, &n); err != nil {
				return v, fmt.Errorf("status.readySteps: %w", err)
			}
			v.ready = &n
		}
		if dp := o.Spec.DataPath; dp != nil {
			v.routerOn, v.router = dp.Mode == "Router", dp.Router
		}
		v.routerState, v.routerNode, v.routerNodeReady = st.RouterState, st.RouterNode, st.RouterNodeReady
		return v, nil
	}
	if hasReady {
		var s string
		if err := json.Unmarshal(st.ReadySteps, &s); err != nil {
			return v, fmt.Errorf("status.readySteps: %w", err)
		}
		v.ready, v.total = readyOfTotal(s)
	}
	d := &st.DetailPhase
	v.steps = d.StepsPhase
	if r := o.Spec.Router; r != nil {
		v.routerOn, v.router = r.Enabled, r
	}
	v.routerState, v.routerNode, v.routerNodeReady = d.RouterPhase, d.RouterNode, d.RouterNodeReady
	return v, nil
}

// stepsOf is the summary of every step of spec, with its status from status (in spec order; a
// step the operator has not reported yet, a new one, has only its spec).
func stepsOf(spec []specStep, status []statusStep) []Step {
	var out []Step
	for i, s := range spec {
		var st statusStep
		if i < len(status) {
			st = status[i]
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
			State:           st.State,
			Reason:          st.Reason,
			Message:         st.Message,
			DeploymentState: firstOf(st.DeploymentState, st.DeploymentPhase),
			ServiceState:    firstOf(st.ServiceState, st.ServicePhase),
			URL:             st.URL,
		})
	}
	return out
}

// failoverOf is spec.failover with its defaults, and whether a manual failback is requested.
func failoverOf(f *failover, annotations map[string]string, version string) Failover {
	out := Failover{Failback: defaultFailback, AfterSeconds: defaultAfterSeconds, FailbackAfterSeconds: defaultFailbackAfterSeconds}
	if f != nil {
		if f.Failback != "" {
			out.Failback = f.Failback
		}
		if f.AfterSeconds != nil {
			out.AfterSeconds = *f.AfterSeconds
		}
		if f.FailbackAfterSeconds != nil {
			out.FailbackAfterSeconds = *f.FailbackAfterSeconds
		}
		out.FailbackRequested = version == VersionV1 && f.FailbackNow != nil && *f.FailbackNow
	}
	out.FailbackRequested = out.FailbackRequested || annotations[FailbackAnnotation] == "true"
	return out
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

// readyOfTotal parses v1beta1's readySteps, "<ready>/<total>".
func readyOfTotal(s string) (*int32, *int32) {
	var ready, total int32
	if _, err := fmt.Sscanf(s, "%d/%d", &ready, &total); err != nil {
		return nil, nil
	}
	return &ready, &total
}

// pascalCase turns v1beta1's lowercase phases (running) into v1's (Running).
func pascalCase(s string) string {
	if s == "" {
		return ""
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// parseTime parses an RFC 3339 time; nil when s is not one.
func parseTime(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil
	}
	return &t
}
