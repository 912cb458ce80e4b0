package plugin

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// readmePatches are the merge patches of README's `kubectl patch pipelines.v1...` commands, by
// what they do.
func readmePatches(t *testing.T) map[Action]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[Action]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "kubectl patch pipelines.v1.distri-infer.ndsl.cn ") {
			continue
		}
		_, rest, ok := strings.Cut(line, " -p '")
		if !ok {
			continue
		}
		patch, _, _ := strings.Cut(rest, "'")
		switch {
		case strings.Contains(patch, `"paused":true`):
			out[ActionPause] = patch
		case strings.Contains(patch, `"paused":null`):
			out[ActionResume] = patch
		case strings.Contains(patch, `"failbackNow":true`):
			out[ActionFailback] = patch
		}
	}
	return out
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// On a v1 server the plugin writes exactly README's patches.
func TestV1PatchesAreREADMEs(t *testing.T) {
	readme := readmePatches(t)
	for _, a := range []Action{ActionPause, ActionResume, ActionFailback} {
		want, ok := readme[a]
		if !ok {
			t.Fatalf("README.md has no %s command", a)
		}
		got, err := Patch(a, VersionV1)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, got, want) {
			t.Errorf("%s: the plugin patches %s, README %s", a, got, want)
		}
	}
}

// On a server of v1beta1 alone, the annotations that version reads.
func TestV1beta1Patches(t *testing.T) {
	for a, want := range map[Action]string{
		ActionPause:    `{"metadata":{"annotations":{"distri-infer.ndsl.cn/paused":"true"}}}`,
		ActionResume:   `{"metadata":{"annotations":{"distri-infer.ndsl.cn/paused":null}}}`,
		ActionFailback: `{"metadata":{"annotations":{"distri-infer.ndsl.cn/failback":"true"}}}`,
	} {
		got, err := Patch(a, VersionV1beta1)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, got, want) {
			t.Errorf("%s: %s, want %s", a, got, want)
		}
	}
	if _, err := Patch(ActionPause, "v2"); err == nil {
		t.Error("a patch for v2")
	}
}

// Since when a step is on its fallback node comes from the operator's latest FailedOver (or
// Relocated) event that moved it to that node.
func TestSetFallbackSince(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 11, 20, 10, m, 0, 0, time.UTC) }
	event := func(reason, msg string, related string, when time.Time, micro bool) corev1.Event {
		e := corev1.Event{Reason: reason, Message: msg}
		if related != "" {
			e.Related = &corev1.ObjectReference{Kind: "Deployment", Name: related}
		}
		if micro {
			e.EventTime = metav1.NewMicroTime(when)
		} else {
			e.LastTimestamp = metav1.NewTime(when)
		}
		return e
	}
	p := mustMap(t, fixture(t, "pipeline-v1.yaml"), VersionV1)
	p.Router.Node, p.Router.OnFallback = "edge-b", true
	SetFallbackSince(&p, []corev1.Event{
		event("FailedOver", "Step 1 (detect) moved from node edge-a, not ready for 30s or more, to node edge-c", "faces-detect", at(1), true),
		event("FailedOver", "Step 1 (detect) moved from node edge-c, not ready for 30s or more, to node edge-b", "faces-detect", at(5), true),
		event("FailedBack", "Step 1 (detect) moved back from node edge-b to node edge-a, which is ready", "faces-detect", at(7), true),
		// An older recorder: no related object, the time in lastTimestamp.
		event("FailedOver", "Router moved from node edge-a, not ready for 30s or more, to node edge-b", "", at(3), false),
		event("NodeNotReady", "step 1 (detect): node edge-a is not ready", "", at(9), false),
	})
	if got := p.Steps[0].FallbackSince; got == nil || !got.Equal(at(5)) {
		t.Errorf("step on fallback since %v, want %v", got, at(5))
	}
	if got := p.Steps[1].FallbackSince; got != nil {
		t.Errorf("a step on its location has a fallback time %v", got)
	}
	if got := p.Router.FallbackSince; got == nil || !got.Equal(at(3)) {
		t.Errorf("router on fallback since %v, want %v", got, at(3))
	}

	p = mustMap(t, fixture(t, "pipeline-v1.yaml"), VersionV1)
	SetFallbackSince(&p, nil)
	if p.Steps[0].FallbackSince != nil {
		t.Error("a fallback time without events")
	}
}
