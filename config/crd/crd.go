// Package crd gives Go code the CustomResourceDefinitions that config/crd installs, as
// controller-gen writes them into bases/.
package crd

import (
	_ "embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/distri-infer.ndsl.cn_pipelines.yaml
var pipelinesYAML []byte

// Pipelines is the Pipeline CRD, every version's schema with it.
func Pipelines() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(pipelinesYAML, crd); err != nil {
		return nil, fmt.Errorf("decode the Pipeline CRD: %w", err)
	}
	return crd, nil
}
