package resources

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

// goldenStepChildren holds the step Deployments and Services the builders make of every sample
// Pipeline, as JSON: what the operator applies.
var goldenStepChildren = filepath.Join("testdata", "sample-step-children.json")

// updateGoldenEnv, set to 1, rewrites goldenStepChildren from the builders instead of comparing.
const updateGoldenEnv = "PIPELINE_OPERATOR_UPDATE_GOLDEN"

// The children of the samples, the seed among them, are byte for byte what the operator applied
// before: a Deployment whose configuration changes gets a new applied hash, so every Pipeline's
// Deployments would be written again on an upgrade, and their pods replaced where the template
// changed. A step field a Pipeline leaves unset adds nothing to its children.
func TestSampleStepChildrenAreUnchanged(t *testing.T) {
	got := sampleStepChildren(t)
	if _, ok := got["distri-infer_v1beta1_pipeline/step-1/deployment"]; !ok {
		t.Fatalf("the seed Pipeline is not among the samples: %v", slices.Sorted(maps.Keys(got)))
	}
	if os.Getenv(updateGoldenEnv) == "1" {
		if err := os.WriteFile(goldenStepChildren, goldenJSON(t, got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(goldenStepChildren)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("decode %s: %v", goldenStepChildren, err)
	}
	if len(got) != len(want) {
		t.Errorf("%d children, %s holds %d", len(got), goldenStepChildren, len(want))
	}
	for key, w := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("%s: no longer built", key)
			continue
		}
		if !bytes.Equal(w, g) {
			t.Errorf("%s changed (-was +now):\n%s", key, cmp.Diff(string(w), string(g)))
		}
	}
}

// goldenJSON is children as a JSON object with one child per line, in key order.
func goldenJSON(t *testing.T, children map[string]json.RawMessage) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("{\n")
	for n, key := range slices.Sorted(maps.Keys(children)) {
		k, err := json.Marshal(key)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s: %s", k, children[key])
		if n < len(children)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// sampleStepChildren are the step Deployments and Services of every sample Pipeline, by sample,
// step and kind, each as the JSON the operator applies.
func sampleStepChildren(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	files, err := samples.Files()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]json.RawMessage{}
	for _, f := range files {
		p := samplePipeline(t, f)
		if p == nil {
			continue
		}
		for i := range p.Spec.Steps {
			key := fmt.Sprintf("%s/%s", strings.TrimSuffix(f.Name, ".yaml"), StepName(p, i))
			for name, child := range map[string]any{
				"deployment": StepDeployment(p, i, "", "", ""),
				"service":    StepService(p, i),
			} {
				data, err := json.Marshal(child)
				if err != nil {
					t.Fatal(err)
				}
				out[key+"/"+name] = data
			}
		}
	}
	return out
}

// samplePipeline is the Pipeline of sample f as the operator reads it (a v1beta1 one converted
// to v1), in namespace vision with a UID; nil when f is not a Pipeline.
func samplePipeline(t *testing.T, f samples.File) *pipelinev1.Pipeline {
	t.Helper()
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(f.Data, &head); err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	if head.Kind != "Pipeline" {
		return nil
	}
	p := &pipelinev1.Pipeline{}
	switch head.APIVersion {
	case pipelinev1.GroupVersion.String():
		if err := yaml.UnmarshalStrict(f.Data, p); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
	case pipelinev1beta1.GroupVersion.String():
		spoke := &pipelinev1beta1.Pipeline{}
		if err := yaml.UnmarshalStrict(f.Data, spoke); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if err := spoke.ConvertTo(p); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
	default:
		t.Fatalf("%s: a Pipeline of %s", f.Name, head.APIVersion)
	}
	p.Namespace, p.UID = "vision", types.UID("uid-"+p.Name)
	return p
}
