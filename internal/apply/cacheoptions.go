package apply

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// CacheOptions limit the manager's cache to the objects the operator manages, without their
// managedFields (children keep a shared marker, see Transforms): the cluster's other
// Deployments, Services, ConfigMaps, volumes, Ingresses, autoscalers and disruption budgets cost it no memory.
// Cached Deployments also drop the pod defaults the apiserver fills in: the operator compares
// only the fields it sets, and never writes a cached object back.
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})
	byObject := map[client.Object]cache.ByObject{
		&corev1.Node{}: {Transform: nodes.StripForPlacement},
	}
	for obj, transform := range Transforms() {
		byObject[obj] = cache.ByObject{Label: managed, Transform: transform}
	}
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: byObject}
}
