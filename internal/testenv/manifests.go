package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// DeployManifests is what `make deploy` applies: config/default, or the kustomization dir under
// config/, built by kustomize (the binary the Makefile builds, named by $KUSTOMIZE).
func DeployManifests(t Fataler, dir string) []*unstructured.Unstructured {
	t.Helper()
	kustomize := os.Getenv("KUSTOMIZE")
	if kustomize == "" {
		t.Fatalf("KUSTOMIZE names the kustomize binary: run `make test-integration`")
	}
	out, err := exec.Command(kustomize, "build", RepoPath("config", dir)).Output()
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("read the manifests of config/%s: %v", dir, err)
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("decode a manifest of config/%s: %v", dir, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// ManifestObject is the one object of kind named name among objs, as T.
func ManifestObject[T any](t Fataler, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
				t.Fatalf("convert %s %s: %v", kind, name, err)
			}
			return out
		}
	}
	t.Fatalf("no %s %s in the manifests", kind, name)
	return nil
}
