package controller

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/types"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

// fataler is what the helpers need of a testing.T or a GinkgoT.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// loadSample reads the sample Pipeline into namespace ns.
func loadSample(t fataler, ns string) *pipelinev1beta1.Pipeline {
	t.Helper()
	p, err := samples.Pipeline(ns)
	if err != nil {
		t.Fatalf("decode sample: %v", err)
	}
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
