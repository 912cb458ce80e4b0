package samples

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/diff"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// TestPipelineV1IsTheDesignSample keeps the v1 sample the same Pipeline as the v1beta1 one: the
// v1beta1 sample converted to v1 is the v1 sample, but for the listenPort variable, which the
// conversion keeps as an env entry (it was an arg) and v1 no longer reads.
func TestPipelineV1IsTheDesignSample(t *testing.T) {
	old, err := Pipeline("ns")
	if err != nil {
		t.Fatal(err)
	}
	want, err := PipelineV1("ns")
	if err != nil {
		t.Fatal(err)
	}
	got := &pipelinev1.Pipeline{}
	if err := old.ConvertTo(got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Steps[0].Env) != 1 || got.Spec.Steps[0].Env[0].Name != "listenPort" || got.Spec.Steps[0].Env[0].Value != "9080" {
		t.Fatalf("the converted first step's env is %v, want listenPort=9080 alone", got.Spec.Steps[0].Env)
	}
	got.Spec.Steps[0].Env = nil
	if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("the v1beta1 sample converted to v1 differs from the v1 sample:\n%s", diff.Diff(want.Spec, got.Spec))
	}
}
