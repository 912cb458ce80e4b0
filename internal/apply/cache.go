package apply

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// Transforms are the cache transforms of every kind of child, which the manager's cache applies
// to what it holds: the up-to-date check compares the desired children against what they leave.
// A child kind the operator writes must be here.
func Transforms() map[client.Object]toolscache.TransformFunc {
	return map[client.Object]toolscache.TransformFunc{
		&appsv1.Deployment{}:                     StripDeployment,
		&corev1.Service{}:                        KeepCreatedMarker,
		&corev1.PersistentVolumeClaim{}:          KeepCreatedMarker,
		&corev1.PersistentVolume{}:               KeepCreatedMarker,
		&networkingv1.Ingress{}:                  KeepCreatedMarker,
		&corev1.ConfigMap{}:                      KeepCreatedMarker,
		&autoscalingv2.HorizontalPodAutoscaler{}: KeepCreatedMarker,
		&policyv1.PodDisruptionBudget{}:          KeepCreatedMarker,
	}
}

// KeepCreatedMarker is the cache transform of children: it drops their managedFields, keeping
// only createdMarker on a child whose create still owns fields.
func KeepCreatedMarker(obj any) (any, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	if hasCreatedFields(m) {
		m.SetManagedFields(createdMarker)
	} else {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// StripDeployment drops, from a cached Deployment, its managedFields (KeepCreatedMarker)
// and the defaults of its pod template that the operator neither sets nor reads, keeps one map
// for its labels and its pods' labels when they are the same, and shares the security contexts
// the operator sets on every step pod among all cached Deployments.
func StripDeployment(obj any) (any, error) {
	obj, err := KeepCreatedMarker(obj)
	if d, ok := obj.(*appsv1.Deployment); ok && err == nil {
		if maps.Equal(d.Spec.Template.Labels, d.Labels) {
			d.Spec.Template.Labels = d.Labels
		}
		pod := &d.Spec.Template.Spec
		pod.RestartPolicy, pod.DNSPolicy, pod.SchedulerName = "", "", ""
		pod.TerminationGracePeriodSeconds = nil
		pod.SecurityContext = shared(pod.SecurityContext, sharedPodSecurity)
		for i := range pod.Containers {
			c := &pod.Containers[i]
			c.TerminationMessagePath, c.TerminationMessagePolicy, c.ImagePullPolicy = "", "", ""
			c.SecurityContext = shared(c.SecurityContext, sharedContainerSecurity...)
		}
	}
	return obj, err
}

// The security contexts of step pods, one copy each for the whole cache. Sharing them is safe:
// the cache's objects are never changed in place (reads from the cache get deep copies).
var (
	sharedPodSecurity       = resources.Convert[corev1.PodSecurityContext](resources.StepPodSecurityContext())
	sharedContainerSecurity = []*corev1.SecurityContext{
		resources.Convert[corev1.SecurityContext](resources.StepSecurityContext(pipelinev1beta1.Step{}, "")),
		resources.Convert[corev1.SecurityContext](resources.StepSecurityContext(pipelinev1beta1.Step{}, resources.PodSecurityRestricted)),
	}
)

// shared returns the one of candidates equal to v, else v itself.
func shared[T any](v *T, candidates ...*T) *T {
	if v == nil {
		return nil
	}
	for _, c := range candidates {
		if equality.Semantic.DeepEqual(v, c) {
			return c
		}
	}
	return v
}
