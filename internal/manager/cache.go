package manager

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// CacheOptions limit the manager's cache to the objects the operator manages, without their
// managedFields (children keep a shared marker, see keepCreatedMarker): the cluster's other
// Deployments, Services, ConfigMaps, volumes, Ingresses, autoscalers and disruption budgets cost it no memory.
// Cached Deployments also drop the pod defaults the apiserver fills in: the operator compares
// only the fields it sets, and never writes a cached object back.
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{resources.LabelManagedBy: resources.ManagedBy})
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:                     {Label: managed, Transform: apply.StripDeployment},
			&corev1.Service{}:                        {Label: managed, Transform: apply.KeepCreatedMarker},
			&corev1.PersistentVolumeClaim{}:          {Label: managed, Transform: apply.KeepCreatedMarker},
			&corev1.PersistentVolume{}:               {Label: managed, Transform: apply.KeepCreatedMarker},
			&networkingv1.Ingress{}:                  {Label: managed, Transform: apply.KeepCreatedMarker},
			&corev1.ConfigMap{}:                      {Label: managed, Transform: apply.KeepCreatedMarker},
			&autoscalingv2.HorizontalPodAutoscaler{}: {Label: managed, Transform: apply.KeepCreatedMarker},
			&policyv1.PodDisruptionBudget{}:          {Label: managed, Transform: apply.KeepCreatedMarker},
			&corev1.Node{}:                           {Transform: nodes.StripForPlacement},
		},
	}
}
