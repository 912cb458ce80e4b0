package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// CacheOptions limit the manager's cache to the objects the operator manages, without their
// managedFields: the cluster's other Deployments, Services, volumes and Ingresses cost it no
// memory.
// Cached Deployments also drop the pod defaults the apiserver fills in: the operator compares
// only the fields it sets, and never writes a cached object back.
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{labelManagedBy: ManagedBy})
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:            {Label: managed, Transform: stripDeploymentDefaults},
			&corev1.Service{}:               {Label: managed},
			&corev1.PersistentVolumeClaim{}: {Label: managed},
			&corev1.PersistentVolume{}:      {Label: managed},
			&networkingv1.Ingress{}:         {Label: managed},
		},
	}
}

// WithMaxConcurrentReconciles sets how many Pipelines are reconciled in parallel.
func WithMaxConcurrentReconciles(n int) func(*builder.Builder) {
	return func(b *builder.Builder) {
		b.WithOptions(controller.Options{MaxConcurrentReconciles: n})
	}
}

// SetupWithManager registers the reconciler: it watches Pipelines, their children and the
// appearance or disappearance of nodes.
func (r *PipelineReconciler) SetupWithManager(mgr ctrl.Manager, opts ...func(*builder.Builder)) error {
	b := r.watches(ctrl.NewControllerManagedBy(mgr).For(&pipelinev1beta1.Pipeline{}))
	for _, o := range opts {
		o(b)
	}
	return b.Complete(r)
}

// watches adds what the Pipeline controller watches besides Pipelines: their children and the
// appearance or disappearance of nodes.
func (r *PipelineReconciler) watches(b *builder.Builder) *builder.Builder {
	return b.
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Owns(&networkingv1.Ingress{}).
		Watches(&corev1.PersistentVolume{}, handler.EnqueueRequestsFromMapFunc(pipelineOfVolume)).
		WatchesMetadata(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.pipelinesOnNode),
			builder.WithPredicates(nodeMembershipChanged())).
		Named("pipeline")
}

// pipelineOfVolume maps a PersistentVolume to the Pipeline its labels name.
func pipelineOfVolume(_ context.Context, obj client.Object) []reconcile.Request {
	l := obj.GetLabels()
	if l[LabelPipeline] == "" || l[LabelPipelineNamespace] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[LabelPipelineNamespace], Name: l[LabelPipeline]}}}
}

// pipelinesOnNode maps a node to the Pipelines with a step located on it.
func (r *PipelineReconciler) pipelinesOnNode(ctx context.Context, obj client.Object) []reconcile.Request {
	hostname := obj.GetLabels()[corev1.LabelHostname]
	if hostname == "" {
		hostname = obj.GetName()
	}
	list := &pipelinev1beta1.PipelineList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, p := range list.Items {
		for _, s := range p.Spec.Steps {
			if s.Location == hostname || s.Location == obj.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
				break
			}
		}
	}
	return reqs
}

// nodeMembershipChanged passes node events that can change whether a location exists: a node
// added or removed, or its hostname label changed. Status heartbeats are ignored.
func nodeMembershipChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetLabels()[corev1.LabelHostname] != e.ObjectNew.GetLabels()[corev1.LabelHostname]
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// stripDeploymentDefaults drops, from a cached Deployment, its managedFields and the defaults of
// its pod template that the operator neither sets nor reads.
func stripDeploymentDefaults(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if d, ok := obj.(*appsv1.Deployment); ok && err == nil {
		pod := &d.Spec.Template.Spec
		pod.RestartPolicy, pod.DNSPolicy, pod.SchedulerName = "", "", ""
		pod.TerminationGracePeriodSeconds, pod.SecurityContext = nil, nil
		for i := range pod.Containers {
			c := &pod.Containers[i]
			c.TerminationMessagePath, c.TerminationMessagePolicy, c.ImagePullPolicy = "", "", ""
		}
	}
	return obj, err
}
