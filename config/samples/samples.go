// Package samples gives Go code the sample Pipeline that users apply: the tests run exactly
// the resource that config/samples ships.
package samples

import (
	_ "embed"

	"sigs.k8s.io/yaml"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

//go:embed distri-infer_v1beta1_pipeline.yaml
var pipelineYAML []byte

// Pipeline decodes the sample Pipeline, strictly, into namespace ns.
func Pipeline(ns string) (*pipelinev1beta1.Pipeline, error) {
	p := &pipelinev1beta1.Pipeline{}
	if err := yaml.UnmarshalStrict(pipelineYAML, p); err != nil {
		return nil, err
	}
	p.Namespace = ns
	return p, nil
}
