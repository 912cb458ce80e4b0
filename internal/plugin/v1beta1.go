package plugin

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	clientv1beta1 "github.com/ndsl-cn/pipeline-operator/pkg/client/clientset/versioned/typed/api/v1beta1"
)

// The reading of a cluster whose operator (0.1.0) serves Pipelines in v1beta1 alone: the
// plugin's only file that knows the deprecated version, deleted with it.

// FromV1beta1 maps a Pipeline read in v1beta1, from a cluster that serves only that version,
// onto the summary: through the API's own conversion to v1, as the apiserver would serve it in
// v1.
func FromV1beta1(p *pipelinev1beta1.Pipeline) (Pipeline, error) {
	hub := &pipelinev1.Pipeline{}
	if err := p.ConvertTo(hub); err != nil {
		return Pipeline{}, fmt.Errorf("pipeline %s/%s: convert from %s: %w", p.Namespace, p.Name, VersionV1beta1, err)
	}
	return summary(hub, p.Annotations, VersionV1beta1), nil
}

// v1beta1Client is the client of the Pipelines of namespace in v1beta1.
func (s *Server) v1beta1Client(namespace string) pipelineClient {
	return v1beta1Client{s.Pipelines.DistriInferV1beta1().Pipelines(namespace), namespace}
}

// v1beta1Client reads Pipelines in v1beta1, from a cluster that serves only that version.
type v1beta1Client struct {
	c         clientv1beta1.PipelineInterface
	namespace string
}

func (c v1beta1Client) get(ctx context.Context, name string) (Pipeline, error) {
	p, err := c.c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Pipeline{}, getError(err, c.namespace, name)
	}
	return FromV1beta1(p)
}

func (c v1beta1Client) list(ctx context.Context, opts metav1.ListOptions) ([]Pipeline, string, error) {
	list, err := c.c.List(ctx, opts)
	if err != nil {
		return nil, "", fmt.Errorf("list pipelines: %w", err)
	}
	items := make([]Pipeline, 0, len(list.Items))
	for i := range list.Items {
		p, err := FromV1beta1(&list.Items[i])
		if err != nil {
			return nil, "", err
		}
		items = append(items, p)
	}
	return items, list.ResourceVersion, nil
}

func (c v1beta1Client) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.c.Watch(ctx, opts)
}

func (c v1beta1Client) patch(ctx context.Context, name string, mergePatch []byte) error {
	_, err := c.c.Patch(ctx, name, types.MergePatchType, mergePatch, metav1.PatchOptions{})
	return err
}
