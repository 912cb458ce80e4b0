package controller

import (
	"encoding/json"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// samplePath is the Pipeline of the product design, as users apply it.
var samplePath = filepath.Join("..", "..", "config", "samples", "distri-infer_v1beta1_pipeline.yaml")

// fataler is what the helpers need of a testing.T or a GinkgoT.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// loadSample reads the sample Pipeline into namespace ns.
func loadSample(t fataler, ns string) *pipelinev1beta1.Pipeline {
	t.Helper()
	data, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatalf("read sample: %v", err)
	}
	p := &pipelinev1beta1.Pipeline{}
	if err := yaml.UnmarshalStrict(data, p); err != nil {
		t.Fatalf("decode sample: %v", err)
	}
	p.Namespace = ns
	p.UID = types.UID("uid-" + p.Name)
	return p
}

// typed converts an apply configuration to the API object of the same shape.
func typed[T any](t fataler, ac any) *T {
	t.Helper()
	data, err := json.Marshal(ac)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}
