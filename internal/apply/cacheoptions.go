package apply

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// CacheOptions limit the manager's cache to the objects the operator manages, without their
// managedFields (children keep a shared marker, see Transforms): the cluster's other
// Deployments, Services, ConfigMaps, volumes, Ingresses, NetworkPolicies, autoscalers and disruption budgets
// cost it no memory.
// Cached Deployments also drop the pod defaults the apiserver fills in: the operator compares
// only the fields it sets, and never writes a cached object back. Of children, and of
// Pipelines (TrimPipeline), the cache keeps no metadata the operator neither writes nor reads,
// so that what others write into them costs the manager no memory.
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})
	byObject := map[client.Object]cache.ByObject{
		&corev1.Node{}: {Transform: nodes.StripForPlacement},
	}
	for obj, transform := range Transforms() {
		byObject[obj] = cache.ByObject{Label: managed, Transform: transform}
	}
	return cache.Options{DefaultTransform: defaultTransform, ByObject: byObject}
}

// stripManagedFields is controller-runtime's transform that drops managedFields.
var stripManagedFields = cache.TransformStripManagedFields()

// defaultTransform is the transform of every cached kind without one of its own: Pipelines are
// trimmed (TrimPipeline), every other object loses its managedFields.
func defaultTransform(obj any) (any, error) {
	if p, ok := obj.(*pipelinev1.Pipeline); ok {
		TrimPipeline(p)
		return p, nil
	}
	return stripManagedFields(obj)
}

// pipelineAnnotations are the annotations of a Pipeline the operator reads: v1beta1's pause and
// failback requests, the conversion data (the order of a v1beta1 step's environment, whether
// its storage identity may be pending) and the recorded storage identity.
var pipelineAnnotations = []string{pipelinev1.PausedAnnotation, pipelinev1.FailbackAnnotation, pipelinev1.ConversionDataAnnotation,
	pipelinev1.StorageIdentityAnnotation}

// unboundedAnnotations are the pipelineAnnotations kept whatever their length: the conversion
// writes them, and the operator reads all of them.
var unboundedAnnotations = []string{pipelinev1.ConversionDataAnnotation, pipelinev1.StorageIdentityAnnotation}

// TrimPipeline drops from the metadata of a cached Pipeline what the operator never reads:
// labels, owner references, managedFields, the name prefix, and every annotation but
// pipelineAnnotations (the pause and failback requests only while short: the operator reads
// them as "true"). A tenant's annotations and labels, kubectl's last-applied-configuration among
// them, then cost the manager no memory; the spec and status it needs are bounded by the CRD's
// schema. The operator writes Pipelines only with patches computed between two copies read
// from the cache, which carry nothing of what was dropped.
func TrimPipeline(p *pipelinev1.Pipeline) {
	p.Labels, p.OwnerReferences, p.ManagedFields, p.GenerateName = nil, nil, nil, ""
	p.Annotations = filtered(p.Annotations, func(k, v string) bool {
		return slices.Contains(pipelineAnnotations, k) && (slices.Contains(unboundedAnnotations, k) || len(v) <= maxOwnAnnotationBytes)
	})
}
