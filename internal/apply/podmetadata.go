package apply

import (
	"encoding/json"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// A step's podMetadata puts labels and annotations of the Pipeline's author on the pod template
// of the step's Deployment. Of a pod template's metadata the cache keeps the operator's own
// labels and annotations, and those the operator's field manager owns: the operator applied
// them, and owns them until someone else changes them. Then the cache no longer holds them, the
// up-to-date check sees the child out of date, and the next apply writes them back. What the
// field manager owns, the managedFields say: they are read here, before the transform drops them
// (KeepCreatedMarker).

// maxPodMetadataEntries is the most labels, and the most annotations, of a pod template that the
// cache keeps besides the operator's own: as many as a step's podMetadata holds.
const maxPodMetadataEntries = 64

// maxPodAnnotationBytes is the longest value of a pod template annotation the cache keeps besides
// the operator's own: the longest a step's podMetadata holds.
const maxPodAnnotationBytes = 4096

// trimPodMetadata leaves on the pod template of d the operator's labels and annotations and
// those of the step's podMetadata (appliedPodMetadata), at most maxPodMetadataEntries of each
// besides the operator's own: a template with more keeps only the operator's own. A Deployment
// the transforms already trimmed, which has lost its managedFields, keeps what the first pass
// left.
func trimPodMetadata(d *appsv1.Deployment) {
	t := &d.Spec.Template
	isOwnLabel := func(k, _ string) bool { return resources.IsOperatorLabel(k) }
	isOwnAnnotation := func(k, v string) bool { return len(v) <= maxOwnAnnotationBytes && slices.Contains(podAnnotations, k) }
	if onlyOwn(t.Labels, isOwnLabel) && onlyOwn(t.Annotations, isOwnAnnotation) {
		return
	}
	labels, annotations, known := appliedPodMetadata(d.ManagedFields)
	applied := func(keys sets.Set[string], maxValue int) func(k, v string) bool {
		return func(k, v string) bool { return len(v) <= maxValue && (!known || keys.Has(k)) }
	}
	t.ObjectMeta = metav1.ObjectMeta{
		Labels:      keepAtMost(t.Labels, isOwnLabel, applied(labels, validation.LabelValueMaxLength)),
		Annotations: keepAtMost(t.Annotations, isOwnAnnotation, applied(annotations, maxPodAnnotationBytes)),
	}
}

// onlyOwn reports whether own accepts every entry of m.
func onlyOwn(m map[string]string, own func(k, v string) bool) bool {
	for k, v := range m {
		if !own(k, v) {
			return false
		}
	}
	return true
}

// keepAtMost is m with the entries own accepts, and those applied accepts when they are at most
// maxPodMetadataEntries; nil when it keeps none.
func keepAtMost(m map[string]string, own, applied func(k, v string) bool) map[string]string {
	n := 0
	for k, v := range m {
		if !own(k, v) && applied(k, v) {
			n++
		}
	}
	if n > maxPodMetadataEntries {
		return filtered(m, own)
	}
	return filtered(m, func(k, v string) bool { return own(k, v) || applied(k, v) })
}

// podTemplateFields is the part of a Deployment's managedFields entry that says which labels and
// annotations of its pod template the entry's manager owns: their keys, prefixed "f:".
type podTemplateFields struct {
	Spec struct {
		Template struct {
			Metadata struct {
				Labels      map[string]json.RawMessage `json:"f:labels"`
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		} `json:"f:template"`
	} `json:"f:spec"`
}

// appliedPodMetadata are the keys of the pod template labels and annotations that the
// operator's field manager (its create, then its apply) owns by entries. known is false when no
// entry carries its field set: the managedFields of an object the transforms already trimmed.
func appliedPodMetadata(entries []metav1.ManagedFieldsEntry) (labels, annotations sets.Set[string], known bool) {
	labels, annotations = sets.New[string](), sets.New[string]()
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		known = true
		if e.Manager != FieldManager || e.Subresource != "" {
			continue
		}
		var fields podTemplateFields
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		m := fields.Spec.Template.Metadata
		for k := range m.Labels {
			if key, ok := strings.CutPrefix(k, "f:"); ok {
				labels.Insert(key)
			}
		}
		for k := range m.Annotations {
			if key, ok := strings.CutPrefix(k, "f:"); ok {
				annotations.Insert(key)
			}
		}
	}
	return labels, annotations, known
}
