package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// fixture reads testdata/name as an unstructured object.
func fixture(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// mustMap maps u, a Pipeline in version, as the plugin reads one: decoded from its JSON into the
// API's types of version, as the generated client does, then summarised.
func mustMap(t *testing.T, u *unstructured.Unstructured, version string) Pipeline {
	t.Helper()
	data, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	switch version {
	case VersionV1:
		p := &pipelinev1.Pipeline{}
		if err := json.Unmarshal(data, p); err != nil {
			t.Fatal(err)
		}
		return FromV1(p)
	case VersionV1beta1:
		p := &pipelinev1beta1.Pipeline{}
		if err := json.Unmarshal(data, p); err != nil {
			t.Fatal(err)
		}
		out, err := FromV1beta1(p)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Fatalf("version %q", version)
	return Pipeline{}
}

// wantFaces is the summary of testdata/pipeline-v1.yaml.
func wantFaces() Pipeline {
	at := func(s string) *time.Time {
		t, _ := time.Parse(time.RFC3339, s)
		return &t
	}
	return Pipeline{
		Namespace: "team-a", Name: "faces", ServedVersion: VersionV1, Phase: "Creating",
		Generation: 4, ObservedGeneration: 3,
		Paused: true, PausedBy: "spec.paused",
		ReadySteps: ptr.To[int32](1), TotalSteps: ptr.To[int32](2),
		Conditions: []Condition{
			{Type: "Available", Status: "False", Reason: "StepsNotAvailable", Message: "step 2 (recognise): 0 of 2 pods available", LastTransitionTime: at("2026-11-20T10:00:00Z")},
			{Type: "Degraded", Status: "True", Reason: "NodeNotReady", Message: "step 1 (detect): node edge-a is not ready", LastTransitionTime: at("2026-11-20T10:00:00Z")},
			{Type: "Reconciled", Status: "False", Reason: "Paused",
				Message: "Paused by spec.paused: children are neither repaired nor updated until it is no longer true", LastTransitionTime: at("2026-11-20T10:05:00Z")},
		},
		Failover: Failover{Failback: "Manual", AfterSeconds: 30, FailbackAfterSeconds: 300, FailbackRequested: true},
		Steps: []Step{{
			Name: "detect", Deployment: "faces-detect",
			Placement: Placement{Location: "edge-a", FallbackLocations: []string{"edge-b", "edge-c"}, Node: "edge-b", NodeReady: ptr.To(true), OnFallback: true},
			Replicas:  ptr.To[int32](1), ReadyReplicas: ptr.To[int32](1),
			State: "Ready", Reason: "PodsReady",
			DeploymentState: "Available", ServiceState: "Ready", URL: "http://faces-detect.team-a.svc.cluster.local.:8080",
		}, {
			Name: "recognise", Deployment: "faces-recognise",
			Placement: Placement{Location: "edge-c", Node: "edge-c", NodeReady: ptr.To(true)},
			Replicas:  ptr.To[int32](2), ReadyReplicas: ptr.To[int32](0),
			State: "Loading", Reason: "ModelLoading",
			Message:         "0 of 2 pods ready; pod faces-recognise-1 runs but is not ready: startup probe of step not passed yet",
			DeploymentState: "Progressing", ServiceState: "Ready", URL: "http://faces-recognise.team-a.svc.cluster.local.:8080",
		}},
		Router: &Router{State: "Available", Placement: Placement{Location: "edge-a", FallbackLocations: []string{"edge-b"}, Node: "edge-a", NodeReady: ptr.To(false)}},
	}
}

func TestFromV1(t *testing.T) {
	got := mustMap(t, fixture(t, "pipeline-v1.yaml"), VersionV1)
	if diff := cmp.Diff(wantFaces(), got); diff != "" {
		t.Errorf("v1 summary (-want +got):\n%s", diff)
	}
}

// The same Pipeline in v1beta1's shape maps to the same summary, less what v1beta1's status does
// not carry (a step's state, reason and message), paused by the annotation.
func TestFromV1beta1(t *testing.T) {
	got := mustMap(t, fixture(t, "pipeline-v1beta1.yaml"), VersionV1beta1)
	want := wantFaces()
	want.ServedVersion = VersionV1beta1
	want.PausedBy = "annotation " + PausedAnnotation
	for i := range want.Steps {
		want.Steps[i].State, want.Steps[i].Reason, want.Steps[i].Message = "", "", ""
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("v1beta1 summary (-want +got):\n%s", diff)
	}
}

// A v1 Pipeline converted to v1beta1 by the API's own conversion (what the apiserver serves a
// v1beta1 client) maps to the summary of its v1 form.
func TestConvertedV1beta1MapsAsV1(t *testing.T) {
	hub := &pipelinev1.Pipeline{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(fixture(t, "pipeline-v1.yaml").Object, hub); err != nil {
		t.Fatal(err)
	}
	spoke := &pipelinev1beta1.Pipeline{}
	if err := spoke.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(spoke)
	if err != nil {
		t.Fatal(err)
	}
	got := mustMap(t, &unstructured.Unstructured{Object: obj}, VersionV1beta1)
	want := wantFaces()
	want.ServedVersion = VersionV1beta1
	want.PausedBy = "annotation " + PausedAnnotation
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("converted v1beta1 summary (-want +got):\n%s", diff)
	}
}

// A Pipeline the operator has not reported on yet: steps from the spec (v1beta1 names an
// unnamed step step-<n>), no phase, no counts, the failover defaults, no router.
func TestFromV1beta1BeforeStatus(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "seed", "namespace": "default", "generation": int64(1)},
		"spec": map[string]any{"steps": []any{
			map[string]any{"image": "nginx:latest", "model": "facedetection-1", "location": "xx-test-node236"},
			map[string]any{"image": "nginx:latest", "model": "facedetection-2"},
		}},
	}}
	got := mustMap(t, u, VersionV1beta1)
	want := Pipeline{
		Namespace: "default", Name: "seed", ServedVersion: VersionV1beta1, Generation: 1,
		Failover: Failover{Failback: "Automatic", AfterSeconds: 60, FailbackAfterSeconds: 300},
		Steps:    []Step{{Name: "step-1", Placement: Placement{Location: "xx-test-node236"}}, {Name: "step-2"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// v1 honours the annotation too (kubectl annotate writes it on the v1 object), and a step on a
// node that is neither its location nor a fallback (the spec changed) is not on a fallback.
func TestFromV1Annotations(t *testing.T) {
	u := fixture(t, "pipeline-v1.yaml")
	unstructured.RemoveNestedField(u.Object, "spec", "paused")
	unstructured.RemoveNestedField(u.Object, "spec", "failover", "failbackNow")
	u.SetAnnotations(map[string]string{PausedAnnotation: "true"})
	steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "steps")
	steps[0].(map[string]any)["fallbackLocations"] = []any{"edge-c"}
	_ = unstructured.SetNestedSlice(u.Object, steps, "spec", "steps")
	got := mustMap(t, u, VersionV1)
	if !got.Paused || got.PausedBy != "annotation "+PausedAnnotation {
		t.Errorf("paused %v by %q, want by the annotation", got.Paused, got.PausedBy)
	}
	if got.Failover.FailbackRequested {
		t.Error("failback requested without failbackNow or the annotation")
	}
	if got.Steps[0].OnFallback {
		t.Error("step on edge-b, which its lists no longer name, reported on a fallback")
	}
}

func TestChooseVersion(t *testing.T) {
	for _, tc := range []struct {
		served []string
		want   string
	}{
		{[]string{"v1", "v1beta1"}, VersionV1},
		{[]string{"v1beta1", "v1"}, VersionV1},
		{[]string{"v1beta1"}, VersionV1beta1},
		{[]string{"v2", "v1"}, VersionV1},
	} {
		got, err := ChooseVersion(tc.served)
		if err != nil || got != tc.want {
			t.Errorf("ChooseVersion(%q) = %q, %v; want %q", tc.served, got, err, tc.want)
		}
	}
	if got, err := ChooseVersion([]string{"v2"}); err == nil {
		t.Errorf("ChooseVersion(v2) = %q, want an error", got)
	}
}

// The names the plugin writes on the wire (patches, label selectors) are the operator's.
func TestWireNamesAreTheOperators(t *testing.T) {
	for _, c := range []struct{ plugin, operator any }{
		{Group, pipelinev1.GroupVersion.Group},
		{labelPipeline, resources.LabelPipeline},
		{labelName, resources.LabelName},
	} {
		if c.plugin != c.operator {
			t.Errorf("the plugin's %v, the operator's %v", c.plugin, c.operator)
		}
	}
}
