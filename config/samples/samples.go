// Package samples gives Go code the samples that users apply (Pipelines and a
// ModelStorageClass): the tests run exactly the resources that config/samples ships.
package samples

import (
	"embed"
	"fmt"
	"io/fs"

	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

//go:embed distri-infer_v1_pipeline.yaml
var pipelineV1YAML []byte

// PipelineV1 decodes the sample Pipeline written in v1, strictly, into namespace ns: the same
// Pipeline as the seed's, without the listenPort variable that v1 no longer reads.
func PipelineV1(ns string) (*pipelinev1.Pipeline, error) {
	p := &pipelinev1.Pipeline{}
	if err := yaml.UnmarshalStrict(pipelineV1YAML, p); err != nil {
		return nil, err
	}
	p.Namespace = ns
	return p, nil
}

//go:embed distri-infer_v1_modelstorageclass.yaml
var modelStorageClassYAML []byte

// ModelStorageClass decodes the sample ModelStorageClass, strictly.
func ModelStorageClass() (*pipelinev1.ModelStorageClass, error) {
	c := &pipelinev1.ModelStorageClass{}
	if err := yaml.UnmarshalStrict(modelStorageClassYAML, c); err != nil {
		return nil, err
	}
	return c, nil
}

//go:embed distri-infer_*.yaml
var files embed.FS

// File is one sample of config/samples: its file name and its YAML.
type File struct {
	Name string
	Data []byte
}

// Files are every sample of config/samples (the files named distri-infer_*.yaml, not the
// kustomization), in file name order: the seed v1beta1 Pipeline, the same Pipeline in v1, one v1
// Pipeline per capability and the ModelStorageClass one of them uses. Each is one object. The
// seed and the v1 Pipeline are the same Pipeline in two versions, and share their name; every
// other sample has a name of its own.
func Files() ([]File, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, fmt.Errorf("list the samples: %w", err)
	}
	out := make([]File, 0, len(entries))
	for _, e := range entries {
		data, err := files.ReadFile(e.Name())
		if err != nil {
			return nil, fmt.Errorf("read sample %s: %w", e.Name(), err)
		}
		out = append(out, File{Name: e.Name(), Data: data})
	}
	return out, nil
}
