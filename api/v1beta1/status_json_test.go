package v1beta1

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStatusShowsZeroCounters checks that counters that are zero are written, not omitted: a
// step with no ready pod says readyReplicas 0.
func TestStatusShowsZeroCounters(t *testing.T) {
	p := Pipeline{Status: PipelineStatus{Phase: PipelinePhaseCreating, DetailPhase: DetailPhase{StepsPhase: []StepStatus{{Name: "step-1"}}}}}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"replicas":0`, `"readyReplicas":0`, `"observedGeneration":0`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s missing from %s", want, data)
		}
	}
	if strings.Contains(string(data), `"nodePort"`) {
		t.Errorf("nodePort 0 (no port) written: %s", data)
	}

	// An empty status and detail phase are omitted.
	data, err = json.Marshal(Pipeline{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"status"`) {
		t.Errorf("empty status written: %s", data)
	}
	data, err = json.Marshal(PipelineStatus{Phase: PipelinePhaseRunning})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"detailPhase"`) {
		t.Errorf("empty detailPhase written: %s", data)
	}
}
