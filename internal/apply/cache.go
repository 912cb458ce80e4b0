package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// Transforms are the cache transforms of every kind of child, which the manager's cache applies
// to what it holds: the up-to-date check compares the desired children against what they leave.
// A child kind the operator writes must be here.
func Transforms() map[client.Object]toolscache.TransformFunc {
	return map[client.Object]toolscache.TransformFunc{
		&appsv1.Deployment{}:                     ownedOnly(StripDeployment),
		&corev1.Service{}:                        ownedOnly(KeepCreatedMarker),
		&corev1.PersistentVolumeClaim{}:          ownedOnly(KeepCreatedMarker),
		&corev1.PersistentVolume{}:               KeepCreatedMarker,
		&networkingv1.Ingress{}:                  ownedOnly(KeepCreatedMarker),
		&corev1.ConfigMap{}:                      ownedOnly(digestData),
		&autoscalingv2.HorizontalPodAutoscaler{}: ownedOnly(KeepCreatedMarker),
		&policyv1.PodDisruptionBudget{}:          ownedOnly(KeepCreatedMarker),
	}
}

// ownedOnly keeps, of a namespaced object, only its identity unless a Pipeline is its
// controller: the cache selects children by the managed-by label, which anyone who may create
// an object can set, and an object nobody proved the operator's must cost it next to no memory.
// The stub has no labels and no owner, so the operator neither lists it as a child nor writes
// over it (Apply reports a conflict on a name it does not own). PersistentVolumes need no such
// proof: only a cluster administrator, or the operator, may create them.
func ownedOnly(keep toolscache.TransformFunc) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		m, ok := obj.(client.Object)
		if !ok || controlledByPipeline(m) {
			return keep(obj)
		}
		return identity(m), nil
	}
}

// controlledByPipeline reports whether obj's controller reference names a Pipeline.
func controlledByPipeline(obj metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != pipelineKind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == pipelinev1.GroupVersion.Group
}

const pipelineKind = "Pipeline"

// identity is an empty object of obj's type with only obj's name, namespace, uid, resource
// version and timestamps.
func identity(obj client.Object) client.Object {
	stub, ok := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	if !ok {
		return obj
	}
	stub.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	stub.SetName(obj.GetName())
	stub.SetNamespace(obj.GetNamespace())
	stub.SetUID(obj.GetUID())
	stub.SetResourceVersion(obj.GetResourceVersion())
	stub.SetGeneration(obj.GetGeneration())
	stub.SetCreationTimestamp(obj.GetCreationTimestamp())
	stub.SetDeletionTimestamp(obj.GetDeletionTimestamp())
	return stub
}

// AnnotationCachedDataDigest stands, in a cached ConfigMap, for its data, which the cache
// never holds: the digest of data and binaryData (DataDigest). The up-to-date check compares
// it with the digest of the desired data. Nothing writes it to the apiserver.
const AnnotationCachedDataDigest = "distri-infer.ndsl.cn/cached-data-digest"

// digestData is the cache transform of ConfigMaps: KeepCreatedMarker, and their data replaced
// by its digest.
func digestData(obj any) (any, error) {
	obj, err := KeepCreatedMarker(obj)
	if cm, ok := obj.(*corev1.ConfigMap); ok && err == nil {
		if _, done := cm.Annotations[AnnotationCachedDataDigest]; done && cm.Data == nil && cm.BinaryData == nil {
			// Already transformed: the informer may pass an object through its transform more
			// than once. (A ConfigMap written with no data and this annotation is taken at its
			// word; only those who may edit the Pipeline's own children can write one.)
			return obj, nil
		}
		annotations := maps.Clone(cm.Annotations)
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[AnnotationCachedDataDigest] = DataDigest(cm.Data, cm.BinaryData)
		cm.Annotations, cm.Data, cm.BinaryData = annotations, nil, nil
	}
	return obj, err
}

// DataDigest is the SHA-256 of a ConfigMap's data and binaryData, in hex.
func DataDigest(data map[string]string, binary map[string][]byte) string {
	// Maps marshal with sorted keys, so equal contents have equal digests.
	encoded, err := json.Marshal(struct {
		Data   map[string]string `json:"d,omitempty"`
		Binary map[string][]byte `json:"b,omitempty"`
	}{data, binary})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(encoded)
	return hex.EncodeToString(sum[:])
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
		resources.Convert[corev1.SecurityContext](resources.StepSecurityContext(pipelinev1.Step{}, "")),
		resources.Convert[corev1.SecurityContext](resources.StepSecurityContext(pipelinev1.Step{}, resources.PodSecurityRestricted)),
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
