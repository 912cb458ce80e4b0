package pipeline

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// pipelineIndex is f as the index function of the cached Pipelines.
func pipelineIndex(f func(*pipelinev1.Pipeline) []string) client.IndexerFunc {
	return func(obj client.Object) []string {
		p, ok := obj.(*pipelinev1.Pipeline)
		if !ok {
			return nil
		}
		return f(p)
	}
}

// pipelineKeys lists the namespace and name of the Pipelines of r that opts select, copying
// nothing else.
func pipelineKeys(ctx context.Context, r client.Reader, opts ...client.ListOption) ([]types.NamespacedName, error) {
	list := &pipelinev1.PipelineList{}
	// Only names are read, and nothing is changed: the cache's own objects need no copy.
	if err := r.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		return nil, err
	}
	out := make([]types.NamespacedName, len(list.Items))
	for i := range list.Items {
		out[i] = client.ObjectKeyFromObject(&list.Items[i])
	}
	return out, nil
}
