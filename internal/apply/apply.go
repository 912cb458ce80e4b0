// Package apply writes the children of Pipelines: create, hand-over of the create's fields to
// server-side apply, apply under one field manager, delete, and the up-to-date check that
// skips writes. The check compares against the manager's cache, whose transforms for the
// children live here too (cache.go): what the cache drops, the check must not want.
package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/schema"
)

// FieldManager is the server-side apply field manager of every write to a child.
const FieldManager = "pipeline-operator"

// AnnotationAppliedHash is the hash of the configuration last applied to a child; a different
// hash means the spec changed, even where it only removed fields.
const AnnotationAppliedHash = "distri-infer.ndsl.cn/applied-hash"

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
	annotations[AnnotationAppliedHash] = a.hash
	u.SetAnnotations(annotations)
	return a, nil
}

// Stamped is the child desired describes as the Applier writes it: with the hash of its
// configuration in AnnotationAppliedHash.
func Stamped(desired runtime.ApplyConfiguration) (*unstructured.Unstructured, error) {
	a, err := newAppliedObject(desired)
	if err != nil {
		return nil, err
	}
	return a.unstructured(), nil
}

func (a *appliedObject) unstructured() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: a.content}
}

// upToDate reports whether existing already holds everything a would apply: the same
// configuration hash (so that nothing was removed from the spec) and every desired field with
// its desired value (so that nobody changed or removed a field the operator owns).
func (a *appliedObject) upToDate(existing client.Object) (bool, error) {
	if existing.GetAnnotations()[AnnotationAppliedHash] != a.hash {
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
	apiVersion, kind := a.content["apiVersion"].(string), a.content["kind"].(string)
	current["apiVersion"], current["kind"] = apiVersion, kind
	want := a.content
	if digest, ok := existing.GetAnnotations()[AnnotationCachedDataDigest]; ok {
		// A ConfigMap from the cache, which holds the digest of its data instead.
		desired, err := a.dataDigest()
		if err != nil || digest != desired {
			return false, err
		}
		want = maps.Clone(want)
		delete(want, "data")
		delete(want, "binaryData")
	}
	return contains(current, want, kindType(apiVersion, kind)), nil
}

// dataDigest is the DataDigest of the data and binaryData of a desired ConfigMap.
func (a *appliedObject) dataDigest() (string, error) {
	cm := &corev1.ConfigMap{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(a.content, cm); err != nil {
		return "", fmt.Errorf("read the desired ConfigMap's data: %w", err)
	}
	return DataDigest(cm.Data, cm.BinaryData), nil
}

// contains reports whether have holds every field of want with the same value, the way the
// apiserver merges an apply of want into have: t is their type in the apiserver's schema.
// Maps may have extra keys (fields defaulted by the apiserver or owned by others). Lists that
// the schema declares associative (list-maps such as env, ports and volumes, and sets) may
// have extra entries, someone else's; each entry of want must be in have, found by its keys.
// Other lists are atomic: they must match element by element. A field that is absent from
// have matches a zero value in want, as API objects omit empty fields.
func contains(have, want any, t fieldType) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		// The map's type is resolved once; a field's type only matters for maps and lists.
		m := t.atom().Map
		for k, wv := range w {
			hv, ok := h[k]
			if !ok && isZero(wv) {
				continue
			}
			var ft fieldType
			switch wv.(type) {
			case map[string]any, []any:
				ft = t.fieldOf(m, k)
			}
			if !ok || !contains(hv, wv, ft) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return false
		}
		list, elem := t.list()
		if list != nil && list.ElementRelationship == schema.Associative {
			for _, wv := range w {
				if !containsEntry(h, wv, elem, list.Keys) {
					return false
				}
			}
			return true
		}
		if len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i], elem) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(have, want)
	}
}

// containsEntry reports whether the associative list have holds the entry want: the entry
// with the same keys (a set's equal element when there are no keys) contains want.
func containsEntry(have []any, want any, elem fieldType, keys []string) bool {
	w, ok := want.(map[string]any)
	if len(keys) == 0 || !ok {
		for _, hv := range have {
			if contains(hv, want, elem) {
				return true
			}
		}
		return false
	}
	for _, hv := range have {
		h, ok := hv.(map[string]any)
		if ok && sameKeys(h, w, elem, keys) {
			return contains(h, w, elem)
		}
	}
	return false
}

// sameKeys reports whether two entries of a list-map have the same key values; a key an entry
// omits has the schema's default (protocol TCP for ports).
func sameKeys(a, b map[string]any, elem fieldType, keys []string) bool {
	for _, k := range keys {
		if !reflect.DeepEqual(elem.keyValue(a, k), elem.keyValue(b, k)) {
			return false
		}
	}
	return true
}

// fieldType is a type of the apiserver's schema for server-side apply. The zero fieldType is
// an unknown type, whose lists are compared as atomic.
type fieldType struct {
	schema *schema.Schema
	ref    schema.TypeRef
}

func (t fieldType) atom() schema.Atom {
	if t.schema == nil {
		return schema.Atom{}
	}
	a, _ := t.schema.Resolve(t.ref)
	return a
}

// fieldOf is the type of field name of m, the map type t resolves to.
func (t fieldType) fieldOf(m *schema.Map, name string) fieldType {
	if m == nil {
		return fieldType{}
	}
	if f, ok := m.FindField(name); ok {
		return fieldType{t.schema, f.Type}
	}
	return fieldType{t.schema, m.ElementType}
}

// list is the list type t is, if it is one, and the type of its elements.
func (t fieldType) list() (*schema.List, fieldType) {
	l := t.atom().List
	if l == nil {
		return nil, fieldType{}
	}
	return l, fieldType{t.schema, l.ElementType}
}

// keyValue is the value of key k of a list-map entry of type t, or the key's default.
func (t fieldType) keyValue(entry map[string]any, k string) any {
	if v, ok := entry[k]; ok {
		return v
	}
	if m := t.atom().Map; m != nil {
		if f, ok := m.FindField(k); ok {
			return f.Default
		}
	}
	return nil
}

var (
	typeConverter = sync.OnceValue(func() managedfields.TypeConverter {
		return applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)
	})
	kindTypes sync.Map // "apiVersion/kind" to fieldType
)

// kindType is the type of the built-in kind apiVersion/kind in the apiserver's schema, the
// zero fieldType for a kind it does not know.
func kindType(apiVersion, kind string) fieldType {
	key := apiVersion + "/" + kind
	if t, ok := kindTypes.Load(key); ok {
		return t.(fieldType)
	}
	var t fieldType
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	if tv, err := typeConverter().ObjectToTyped(obj); err == nil {
		t = fieldType{tv.Schema(), tv.TypeRef()}
	}
	kindTypes.Store(key, t)
	return t
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
