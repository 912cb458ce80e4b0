package crd

import (
	"os"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The namespaced Pipeline is in the all and distri-infer categories; the cluster-scoped
// ModelStorageClass is in neither:
// kubectl get all lists every kind of the category, and fails for a tenant who may not list
// a cluster-scoped one.
func TestCategories(t *testing.T) {
	pipelines, err := Pipelines()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pipelines.Spec.Names.Categories, "all") || !slices.Contains(pipelines.Spec.Names.Categories, "distri-infer") {
		t.Errorf("Pipeline categories %v, want all and distri-infer", pipelines.Spec.Names.Categories)
	}
	// pl and pls as earlier releases had them; dipl, distinctive beside another project's Pipeline kind.
	if !slices.Equal(pipelines.Spec.Names.ShortNames, []string{"pl", "pls", "dipl"}) {
		t.Errorf("Pipeline short names %v, want pl, pls and dipl", pipelines.Spec.Names.ShortNames)
	}
	data, err := os.ReadFile("bases/distri-infer.ndsl.cn_modelstorageclasses.yaml")
	if err != nil {
		t.Fatal(err)
	}
	classes := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, classes); err != nil {
		t.Fatal(err)
	}
	if classes.Spec.Scope != apiextensionsv1.ClusterScoped || slices.Contains(classes.Spec.Names.Categories, "all") {
		t.Errorf("ModelStorageClass: scope %s, categories %v; want cluster-scoped and not in all", classes.Spec.Scope, classes.Spec.Names.Categories)
	}
}
