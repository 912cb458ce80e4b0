// Package samples gives Go code the samples that users apply (a Pipeline and a
// ModelStorageClass): the tests run exactly the resources that config/samples ships.
package samples

import (
	_ "embed"

	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
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

//go:embed distri-infer_v1_pipeline.yaml
var pipelineV1YAML []byte

// PipelineV1 decodes the sample Pipeline written in v1, strictly, into namespace ns: the same
// Pipeline as Pipeline's, without the listenPort variable that v1 no longer reads.
func PipelineV1(ns string) (*pipelinev1.Pipeline, error) {
	p := &pipelinev1.Pipeline{}
	if err := yaml.UnmarshalStrict(pipelineV1YAML, p); err != nil {
		return nil, err
	}
	p.Namespace = ns
	return p, nil
}

//go:embed distri-infer_v1beta1_modelstorageclass.yaml
var modelStorageClassYAML []byte

// ModelStorageClass decodes the sample ModelStorageClass, strictly.
func ModelStorageClass() (*pipelinev1beta1.ModelStorageClass, error) {
	c := &pipelinev1beta1.ModelStorageClass{}
	if err := yaml.UnmarshalStrict(modelStorageClassYAML, c); err != nil {
		return nil, err
	}
	return c, nil
}
