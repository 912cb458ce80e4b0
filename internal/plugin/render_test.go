package plugin

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// now is the clock of the golden outputs.
var now = time.Date(2026, 11, 20, 10, 30, 0, 0, time.UTC)

// golden compares got with testdata/name, or writes it there with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

// faces is testdata/pipeline-v1.yaml with its step's failover event read.
func faces(t *testing.T) Pipeline {
	p := mustMap(t, fixture(t, "pipeline-v1.yaml"), VersionV1)
	since := time.Date(2026, 11, 20, 10, 1, 30, 0, time.UTC)
	p.Steps[0].FallbackSince = &since
	return p
}

func render(t *testing.T, items []Pipeline, color bool) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, items, RenderOptions{Color: color, Now: now}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRenderTree(t *testing.T) {
	seed := mustMap(t, fixture(t, "pipeline-v1beta1.yaml"), VersionV1beta1)
	golden(t, "status.txt", []byte(render(t, []Pipeline{faces(t), seed}, false)))
}

func TestRenderColors(t *testing.T) {
	plain := render(t, []Pipeline{faces(t)}, false)
	if strings.Contains(plain, "\x1b[") {
		t.Errorf("the tree without colour holds escape sequences:\n%q", plain)
	}
	colored := render(t, []Pipeline{faces(t)}, true)
	for _, want := range []string{
		colorYellow + "Creating" + colorReset,                // the phase
		colorGreen + "Ready" + colorReset,                    // a step that serves
		colorYellow + "Loading" + colorReset,                 // a step that does not yet
		colorYellow + "0/2 ready" + colorReset,               // its pods
		colorRed + "(not ready)" + colorReset,                // the router's node
		colorRed + "Degraded=True" + colorReset,              // a condition that is wrong
		colorGreen + "(ready)" + colorReset,                  // a step's node
		colorYellow + "on fallback node edge-b" + colorReset, // failover
	} {
		if !strings.Contains(colored, want) {
			t.Errorf("the coloured tree lacks %q:\n%s", want, colored)
		}
	}
	stripped := strings.NewReplacer(colorReset, "", colorRed, "", colorGreen, "", colorYellow, "", colorBold, "").Replace(colored)
	if stripped != plain {
		t.Errorf("the coloured tree differs from the plain one by more than colours:\n%s\n%s", stripped, plain)
	}
	running := faces(t)
	running.Phase = "Running"
	if got := render(t, []Pipeline{running}, true); !strings.Contains(got, colorGreen+"Running"+colorReset) {
		t.Errorf("Running is not green:\n%s", got)
	}
	running.Phase = "Failed"
	if got := render(t, []Pipeline{running}, true); !strings.Contains(got, colorRed+"Failed"+colorReset) {
		t.Errorf("Failed is not red:\n%s", got)
	}
}

// The tree is coloured only on a terminal, with NO_COLOR unset or empty and without --no-color.
func TestUseColor(t *testing.T) {
	for _, tc := range []struct {
		terminal bool
		noColor  string
		flag     bool
		want     bool
	}{
		{true, "", false, true},
		{false, "", false, false},
		{true, "1", false, false},
		{true, "", true, false},
	} {
		env := Env{
			IOStreams:  genericiooptions.IOStreams{Out: io.Discard},
			Getenv:     func(k string) string { return map[string]string{"NO_COLOR": tc.noColor}[k] },
			IsTerminal: func(io.Writer) bool { return tc.terminal },
		}
		if got := UseColor(env, tc.flag); got != tc.want {
			t.Errorf("terminal %v, NO_COLOR %q, --no-color %v: colour %v, want %v", tc.terminal, tc.noColor, tc.flag, got, tc.want)
		}
	}
	// A file is not a terminal.
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if isTerminal(f) || isTerminal(&bytes.Buffer{}) {
		t.Error("a file or a buffer counts as a terminal")
	}
}

func TestDocumentJSON(t *testing.T) {
	seed := mustMap(t, fixture(t, "pipeline-v1beta1.yaml"), VersionV1beta1)
	data, err := json.MarshalIndent(NewDocument([]Pipeline{faces(t), seed}), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "status.json", append(data, '\n'))

	// The document decodes back into itself, and an empty one has an empty list, not null.
	var back Document
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.APIVersion != DocumentAPIVersion || back.Kind != DocumentKind || len(back.Items) != 2 {
		t.Errorf("decoded %s %s with %d items", back.APIVersion, back.Kind, len(back.Items))
	}
	empty, _ := json.Marshal(NewDocument(nil))
	if want := `{"apiVersion":"` + DocumentAPIVersion + `","kind":"PipelineStatusList","items":[]}`; string(empty) != want {
		t.Errorf("empty document %s, want %s", empty, want)
	}
}

// A Pipeline that runs: every condition as it is when all is well, none listed under them;
// a rollout under way is yellow, a stopped one red.
func TestConditionsWhenAllIsWell(t *testing.T) {
	p := faces(t)
	p.Conditions = []Condition{
		{Type: "Available", Status: "True", Reason: "AllStepsAvailable"},
		{Type: "Progressing", Status: "False", Reason: "RolloutComplete", Message: "Every step runs the current spec"},
		{Type: "Degraded", Status: "False", Reason: "AsExpected"},
		{Type: "Reconciled", Status: "True", Reason: "ReconcileSucceeded"},
		{Type: "Ready", Status: "True", Reason: "Running"},
		{Type: "Reconciling", Status: "False", Reason: "RolloutComplete"},
		{Type: "Stalled", Status: "False", Reason: "AsExpected"},
	}
	got := render(t, []Pipeline{p}, false)
	if !strings.Contains(got, "├── conditions  Available=True Progressing=False Degraded=False Reconciled=True Ready=True Reconciling=False Stalled=False\n├── paused") {
		t.Errorf("conditions of a Pipeline that runs:\n%s", got)
	}
	p.Conditions = []Condition{{Type: "Progressing", Status: "True", Reason: "RollingOut"}, {Type: "Ready", Status: "False", Reason: "Progressing"}}
	if got := render(t, []Pipeline{p}, true); !strings.Contains(got, colorYellow+"Progressing=True"+colorReset) || !strings.Contains(got, colorYellow+"Ready=False"+colorReset) {
		t.Errorf("a rollout under way:\n%s", got)
	}
	p.Conditions = []Condition{{Type: "Progressing", Status: "False", Reason: "RolloutFailed", Message: "see Degraded"}}
	if got := render(t, []Pipeline{p}, true); !strings.Contains(got, colorRed+"Progressing=False"+colorReset) || !strings.Contains(got, "Progressing: RolloutFailed: see Degraded") {
		t.Errorf("a stopped rollout:\n%s", got)
	}
}
