package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the server-side apply field manager of every write to a child.
const FieldManager = "pipeline-operator"

// appliedObject is a desired child ready for server-side apply: its configuration as
// unstructured content, stamped with the hash of that configuration.
type appliedObject struct {
	content map[string]any
	hash    string
}

// newAppliedObject prepares a desired apply configuration for comparison and apply.
func newAppliedObject(desired runtime.ApplyConfiguration) (*appliedObject, error) {
	data, err := json.Marshal(desired)
	if err != nil {
		return nil, fmt.Errorf("marshal desired %T: %w", desired, err)
	}
	sum := sha256.Sum256(data)
	content := map[string]any{}
	if err := json.Unmarshal(data, &content); err != nil {
		return nil, fmt.Errorf("unmarshal desired %T: %w", desired, err)
	}
	a := &appliedObject{content: content, hash: hex.EncodeToString(sum[:])[:16]}
	u := a.unstructured()
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[annotationAppliedHash] = a.hash
	u.SetAnnotations(annotations)
	return a, nil
}

func (a *appliedObject) unstructured() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: a.content}
}

// upToDate reports whether existing already holds everything a would apply: the same
// configuration hash (so that nothing was removed from the spec) and every desired field with
// its desired value (so that nobody changed or removed a field the operator owns).
func (a *appliedObject) upToDate(existing client.Object) (bool, error) {
	if existing.GetAnnotations()[annotationAppliedHash] != a.hash {
		return false, nil
	}
	data, err := json.Marshal(existing)
	if err != nil {
		return false, fmt.Errorf("marshal existing %T: %w", existing, err)
	}
	current := map[string]any{}
	if err := json.Unmarshal(data, &current); err != nil {
		return false, fmt.Errorf("unmarshal existing %T: %w", existing, err)
	}
	// Typed objects read from the apiserver may come without their type meta.
	current["apiVersion"], current["kind"] = a.content["apiVersion"], a.content["kind"]
	return contains(current, a.content), nil
}

// contains reports whether have holds every field of want with the same value. Maps may have
// extra keys (fields defaulted by the apiserver or owned by others); lists must match element
// by element, since the operator owns the whole of each list it sets. A field that is absent
// from have matches a zero value in want, as API objects omit empty fields.
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok && isZero(wv) {
				continue
			}
			if !ok || !contains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(have, want)
	}
}

// isZero reports whether a JSON value is empty: "", false, 0, null, {} or [].
func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}
