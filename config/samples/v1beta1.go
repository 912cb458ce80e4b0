package samples

import (
	_ "embed"
	"fmt"

	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// The seed Pipeline, in the deprecated version v1beta1: the samples' only file that knows it.

//go:embed distri-infer_v1beta1_pipeline.yaml
var pipelineYAML []byte

// PipelineV1beta1 decodes the seed Pipeline, the v1beta1 resource users hold, strictly, into
// namespace ns.
func PipelineV1beta1(ns string) (*pipelinev1beta1.Pipeline, error) {
	p := &pipelinev1beta1.Pipeline{}
	if err := yaml.UnmarshalStrict(pipelineYAML, p); err != nil {
		return nil, err
	}
	p.Namespace = ns
	return p, nil
}

// Pipeline is the seed Pipeline (PipelineV1beta1) as the apiserver stores it and the operator
// reads it: converted to v1, with the conversion data that keeps what v1 cannot say.
func Pipeline(ns string) (*pipelinev1.Pipeline, error) {
	spoke, err := PipelineV1beta1(ns)
	if err != nil {
		return nil, err
	}
	p := &pipelinev1.Pipeline{}
	if err := spoke.ConvertTo(p); err != nil {
		return nil, fmt.Errorf("convert the seed Pipeline to v1: %w", err)
	}
	return p, nil
}
