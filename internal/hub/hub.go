// Package hub is how the operator reads and writes Pipelines: in v1, the version the apiserver
// stores (the hub of the conversion), converted in process to and from v1beta1, the version the
// operator's logic is written against. The manager's cache holds v1 Pipelines, so reading them
// costs no call to the conversion webhook, and neither does writing them: the apiserver calls
// the webhook only for clients of v1beta1.
//
// Every read goes through Get, List or Keys, every index of Pipelines through IndexFunc, and
// every write through Patch; For and Watches of Pipelines use Object.
package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// Object is a Pipeline as the manager caches and watches it.
func Object() *pipelinev1.Pipeline { return &pipelinev1.Pipeline{} }

// Kind is the group, version and kind of Object.
var Kind = pipelinev1.GroupVersion.WithKind("Pipeline")

// Spoke converts h to v1beta1.
func Spoke(h *pipelinev1.Pipeline) (*pipelinev1beta1.Pipeline, error) {
	p := &pipelinev1beta1.Pipeline{}
	if err := p.ConvertFrom(h); err != nil {
		return nil, fmt.Errorf("convert Pipeline %s/%s from v1: %w", h.Namespace, h.Name, err)
	}
	return p, nil
}

// Get reads the Pipeline key names from r, as v1beta1.
func Get(ctx context.Context, r client.Reader, key client.ObjectKey) (*pipelinev1beta1.Pipeline, error) {
	h := Object()
	if err := r.Get(ctx, key, h); err != nil {
		return nil, err
	}
	return Spoke(h)
}

// List lists the Pipelines of r that opts select, as v1beta1.
func List(ctx context.Context, r client.Reader, opts ...client.ListOption) ([]pipelinev1beta1.Pipeline, error) {
	list := &pipelinev1.PipelineList{}
	// Each item is converted into a new object: the cache's own need not be copied first.
	if err := r.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		return nil, err
	}
	out := make([]pipelinev1beta1.Pipeline, len(list.Items))
	for i := range list.Items {
		p, err := Spoke(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out[i] = *p
	}
	return out, nil
}

// Keys lists the namespace and name of the Pipelines of r that opts select, converting none.
func Keys(ctx context.Context, r client.Reader, opts ...client.ListOption) ([]types.NamespacedName, error) {
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

// IndexFunc is f, written for v1beta1 Pipelines, as the index function of the cached v1
// Pipelines: a Pipeline that does not convert gets no value.
func IndexFunc(f func(*pipelinev1beta1.Pipeline) []string) client.IndexerFunc {
	return func(obj client.Object) []string {
		h, ok := obj.(*pipelinev1.Pipeline)
		if !ok {
			return nil
		}
		p, err := Spoke(h)
		if err != nil {
			return nil
		}
		return f(p)
	}
}

// Patch writes what changed from before to p (both v1beta1, p as edited from before) as a JSON
// merge patch of the v1 Pipeline, carrying before's resourceVersion: the apiserver refuses it
// with a conflict when before is not the latest version. With status, the patch goes to the
// status subresource. p then holds what the apiserver answered.
func Patch(ctx context.Context, c client.Client, before, p *pipelinev1beta1.Pipeline, status bool) error {
	base, err := ToHub(before)
	if err != nil {
		return err
	}
	h, err := ToHub(p)
	if err != nil {
		return err
	}
	if status && keepsStatus(h) {
		// The status subresource would drop the annotation that holds it.
		return fmt.Errorf("the status of Pipeline %s/%s does not convert to v1 without loss", p.Namespace, p.Name)
	}
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if status {
		err = c.Status().Patch(ctx, h, patch)
	} else {
		err = c.Patch(ctx, h, patch)
	}
	if err != nil {
		return err
	}
	written, err := Spoke(h)
	if err != nil {
		return err
	}
	*p = *written
	return nil
}

// ToHub converts p to v1.
func ToHub(p *pipelinev1beta1.Pipeline) (*pipelinev1.Pipeline, error) {
	h := &pipelinev1.Pipeline{}
	if err := p.ConvertTo(h); err != nil {
		return nil, fmt.Errorf("convert Pipeline %s/%s to v1: %w", p.Namespace, p.Name, err)
	}
	return h, nil
}

// keepsStatus reports whether converting to h kept part of the v1beta1 status in h's conversion
// data, because v1 cannot hold it.
func keepsStatus(h *pipelinev1.Pipeline) bool {
	data, ok := h.Annotations[pipelinev1.ConversionDataAnnotation]
	if !ok {
		return false
	}
	var kept map[string]json.RawMessage
	if json.Unmarshal([]byte(data), &kept) != nil {
		return true
	}
	_, ok = kept["status"]
	return ok
}
