package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"reflect"
	"slices"

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
//
// What the cache keeps of a child does not depend on what others write into it: of an object
// no Pipeline controls only its identity (ownedOnly), of a child only the metadata the operator
// writes or reads (trimMetadata), and of a child still larger than MaxCachedChildBytes only a
// summary (summarize), in whose stead the operator reads the child from the apiserver
// (Applier.Get).
func Transforms() map[client.Object]toolscache.TransformFunc {
	return map[client.Object]toolscache.TransformFunc{
		&appsv1.Deployment{}:                     ownedOnly(StripDeployment),
		&corev1.Service{}:                        ownedOnly(KeepCreatedMarker),
		&corev1.PersistentVolumeClaim{}:          ownedOnly(KeepCreatedMarker),
		&corev1.PersistentVolume{}:               bounded(KeepCreatedMarker),
		&networkingv1.Ingress{}:                  ownedOnly(KeepCreatedMarker),
		&networkingv1.NetworkPolicy{}:            ownedOnly(KeepCreatedMarker),
		&corev1.ConfigMap{}:                      ownedOnly(digestData),
		&autoscalingv2.HorizontalPodAutoscaler{}: ownedOnly(KeepCreatedMarker),
		&policyv1.PodDisruptionBudget{}:          ownedOnly(KeepCreatedMarker),
	}
}

// ownedOnly keeps, of a namespaced object, only its identity unless a Pipeline is its
// controller: the cache selects children by the managed-by label, which anyone who may create
// an object can set, and an object nobody proved the operator's must cost it next to no memory.
// The stub has no labels and no owner, so the operator neither lists it as a child nor writes
// over it (Apply reports a conflict on a name it does not own). A child is bounded by keep.
// PersistentVolumes need no such proof: only a cluster administrator, or the operator, may
// create them.
func ownedOnly(keep toolscache.TransformFunc) toolscache.TransformFunc {
	keepBounded := bounded(keep)
	return func(obj any) (any, error) {
		m, ok := obj.(client.Object)
		if !ok || controlledByPipeline(m) {
			return keepBounded(obj)
		}
		return identity(m), nil
	}
}

// controlledByPipeline reports whether obj's controller reference names a Pipeline. A
// reference no Pipeline could have written (a name longer than a Pipeline's, an API version or
// uid longer than any) does not: whoever controls the object, it is not the operator.
func controlledByPipeline(obj metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != pipelineKind || len(ref.Name) > maxPipelineNameLength ||
		len(ref.UID) > maxReferenceLength || len(ref.APIVersion) > maxReferenceLength {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == pipelinev1.GroupVersion.Group
}

// maxPipelineNameLength is the longest name of a Pipeline (its CRD's rule on metadata.name);
// maxReferenceLength bounds the API version and uid of an owner reference to a Pipeline.
const (
	maxPipelineNameLength = 63
	maxReferenceLength    = 64
)

// MaxCachedChildBytes is the largest child, in its protobuf encoding after the transforms, that
// the cache keeps whole: a few times the largest child the builders make from a Pipeline of
// ordinary size (about 1.5 KiB for a step's Deployment). A larger one, whether its Pipeline
// asks for that much (long env values) or someone wrote into it, is kept as a summary.
const MaxCachedChildBytes = 16 << 10

// AnnotationCachedSummary marks, in the cache, the summary of a child larger than
// MaxCachedChildBytes: its identity, its controller, the operator's labels, its status and, of a
// claim, its class and volume. Readers that need more read the child from the apiserver
// (Applier.Get). Nothing writes it to the apiserver.
const AnnotationCachedSummary = "distri-infer.ndsl.cn/cached-summary"

// IsSummary reports whether obj, read from the cache, is only the summary of a child larger
// than MaxCachedChildBytes (see AnnotationCachedSummary).
func IsSummary(obj metav1.Object) bool {
	_, ok := obj.GetAnnotations()[AnnotationCachedSummary]
	return ok
}

// bounded is the transform of an object that may be a child: its metadata trimmed to the
// operator's (trimMetadata), then keep, and a summary instead when the result is still larger
// than MaxCachedChildBytes. A summary stays one when the informer passes it through again.
func bounded(keep toolscache.TransformFunc) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		m, ok := obj.(client.Object)
		if !ok {
			return keep(obj)
		}
		trimMetadata(m)
		if IsSummary(m) {
			return summarize(m), nil
		}
		kept, err := keep(obj)
		if err != nil {
			return kept, err
		}
		if s, ok := kept.(sized); ok && s.Size() > MaxCachedChildBytes {
			return summarize(m), nil
		}
		return kept, nil
	}
}

// sized is an API object that knows the length of its protobuf encoding.
type sized interface{ Size() int }

// maxOwnAnnotationBytes bounds the value of an annotation the operator writes on a child: hashes
// and digests, at most 64 characters. A longer value is not the operator's, and is dropped.
const maxOwnAnnotationBytes = 128

// childAnnotations are the annotations the operator writes on children, or the cache on the
// children it holds; podAnnotations those it writes on the pod template of a Deployment.
var (
	childAnnotations = []string{AnnotationAppliedHash, AnnotationCachedDataDigest, AnnotationCachedSummary}
	podAnnotations   = []string{resources.AnnotationRouterConfigHash}
)

// trimMetadata drops from the metadata of obj, a child the operator may own, what it neither
// writes nor reads, whoever wrote it: others' labels and annotations (its own too when longer
// than it writes them), owner references other than the controller's, finalizers and the name
// prefix; and from the pod template of a Deployment every label and annotation but the
// operator's and those of the step's podMetadata that its apply owns (trimPodMetadata). The
// up-to-date check compares only the operator's own metadata.
func trimMetadata(obj client.Object) {
	obj.SetLabels(operatorLabels(obj.GetLabels()))
	obj.SetAnnotations(ownAnnotations(obj.GetAnnotations(), childAnnotations))
	obj.SetOwnerReferences(controllerOnly(obj.GetOwnerReferences()))
	obj.SetFinalizers(nil)
	obj.SetGenerateName("")
	if d, ok := obj.(*appsv1.Deployment); ok {
		trimPodMetadata(d)
	}
}

// operatorLabels are the labels of l that the operator puts on children; nil when none is.
func operatorLabels(l map[string]string) map[string]string {
	return filtered(l, func(k, _ string) bool { return resources.IsOperatorLabel(k) })
}

// ownAnnotations are the annotations of a whose keys are in keys, with a value no longer than
// maxOwnAnnotationBytes; nil when none is.
func ownAnnotations(a map[string]string, keys []string) map[string]string {
	return filtered(a, func(k, v string) bool { return len(v) <= maxOwnAnnotationBytes && slices.Contains(keys, k) })
}

// filtered is m with only the entries keep accepts: m itself when it accepts all of them, nil
// when it accepts none.
func filtered(m map[string]string, keep func(k, v string) bool) map[string]string {
	n := 0
	for k, v := range m {
		if keep(k, v) {
			n++
		}
	}
	switch n {
	case 0:
		return nil
	case len(m):
		return m
	}
	out := make(map[string]string, n)
	for k, v := range m {
		if keep(k, v) {
			out[k] = v
		}
	}
	return out
}

// controllerOnly is the controller reference of refs, alone; nil without one.
func controllerOnly(refs []metav1.OwnerReference) []metav1.OwnerReference {
	for i, r := range refs {
		if r.Controller != nil && *r.Controller {
			if len(refs) == 1 {
				return refs
			}
			return refs[i : i+1 : i+1]
		}
	}
	return nil
}

// summarize is the summary of child obj, whose metadata trimMetadata trimmed: its identity, its
// controller reference, the operator's labels, the mark of its create (KeepCreatedMarker), the
// mark AnnotationCachedSummary, and what readers of the cache use without reading the whole
// child: its status (the predicates of the watches compare it), and the class and volume of a
// claim (the stale pass keeps claims a StorageClass provisioned). A status that alone makes
// the summary larger than MaxCachedChildBytes is left out too.
func summarize(obj client.Object) client.Object {
	s := identity(obj)
	s.SetLabels(obj.GetLabels())
	s.SetOwnerReferences(obj.GetOwnerReferences())
	s.SetAnnotations(map[string]string{AnnotationCachedSummary: "true"})
	if hasCreatedFields(obj) {
		s.SetManagedFields(createdMarker)
	}
	withStatus := s.DeepCopyObject().(client.Object)
	summarized(withStatus, obj)
	if w, ok := withStatus.(sized); ok && w.Size() > MaxCachedChildBytes {
		return s
	}
	return withStatus
}

// summarized copies into s, the summary of obj, the fields of obj that summarize keeps besides
// its metadata.
func summarized(s, obj client.Object) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		s.(*appsv1.Deployment).Status = o.Status
	case *corev1.Service:
		s.(*corev1.Service).Status = o.Status
	case *corev1.PersistentVolumeClaim:
		c := s.(*corev1.PersistentVolumeClaim)
		c.Spec.StorageClassName, c.Spec.VolumeName, c.Status = o.Spec.StorageClassName, o.Spec.VolumeName, o.Status
	case *corev1.PersistentVolume:
		v := s.(*corev1.PersistentVolume)
		v.Spec.ClaimRef, v.Status = o.Spec.ClaimRef, o.Status
	case *networkingv1.Ingress:
		s.(*networkingv1.Ingress).Status = o.Status
	case *autoscalingv2.HorizontalPodAutoscaler:
		s.(*autoscalingv2.HorizontalPodAutoscaler).Status = o.Status
	case *policyv1.PodDisruptionBudget:
		s.(*policyv1.PodDisruptionBudget).Status = o.Status
	}
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
