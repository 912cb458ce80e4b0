package jsonshape

import (
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

func TestCheck(t *testing.T) {
	steps := &Shape{Properties: map[string]*Shape{
		"spec": {Properties: map[string]*Shape{
			"steps": {MaxItems: 2, Items: &Shape{Properties: map[string]*Shape{"env": {MaxItems: 1}}}},
			"args":  {MaxProperties: 1},
		}},
		"user": {MaxBytes: 16},
	}}
	generic := Limits{MaxDepth: 5, MaxItems: 3, MaxProperties: 3, MaxValues: 20}
	for _, tc := range []struct {
		name, doc string
		values    int
		err       string
	}{
		{name: "within every bound", doc: `{"spec":{"steps":[{"env":[1]},{}],"args":{"a":"b"}},"user":"0123456789"}`, values: 10},
		{name: "a scalar", doc: ` 7 `, values: 1},
		{name: "an array over its shape", doc: `{"spec":{"steps":[{},{},{}]}}`, err: "spec.steps: more than 2 items"},
		{name: "an item's array over its shape", doc: `{"spec":{"steps":[{},{"env":[1,2]}]}}`, err: "spec.steps[1].env: more than 1 items"},
		{name: "a map over its shape", doc: `{"spec":{"args":{"a":"1","b":"2"}}}`, err: "spec.args: more than 1 members"},
		{name: "an array over the default", doc: `{"other":[1,2,3,4]}`, err: "other: more than 3 items"},
		{name: "an object over the default", doc: `{"other":{"a":1,"b":2,"c":3,"d":4}}`, err: "other: more than 3 members"},
		{name: "a value over its bytes", doc: `{"user":"01234567890123456789"}`, err: "user: more than 16 bytes"},
		{name: "an object over its bytes", doc: `{"user":{"name":"01234567890123456789"}}`, err: "user: more than 16 bytes"},
		{name: "too deep", doc: `{"a":{"b":{"c":{"d":{"e":{}}}}}}`, err: "a.b.c.d.e: nested more than 5 deep"},
		{name: "too many values", doc: `[[1,1,1],[1,1,1],[1,1,1],[1,1,1],[1,1,1],[1,1,1]]`, err: "more than 3 items"},
		{name: "too many values in all", doc: `{"a":[1,1,1],"b":[1,1,1],"c":[[1,1,1],[1,1,1],[1,1,1]]}`, err: "more than 20 values"},
		{name: "two documents", doc: `{}{}`, err: "more than one JSON value"},
		{name: "cut short", doc: `{"a":[1`, err: "unexpected EOF"},
		{name: "not JSON", doc: `{"a":}`, err: "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values, err := Check([]byte(tc.doc), steps, generic)
			if tc.err == "" {
				if err != nil || values != tc.values {
					t.Fatalf("Check = %d, %v; want %d values", values, err, tc.values)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Check = %v; want an error with %q", err, tc.err)
			}
		})
	}
}

// A body of hundreds of thousands of empty items is refused at the bound, having read only
// what comes before it.
func TestCheckStopsAtTheBound(t *testing.T) {
	doc := `{"spec":{"steps":[` + strings.Repeat(`{},`, 300_000) + `{}]}}`
	shape := &Shape{Properties: map[string]*Shape{"spec": {Properties: map[string]*Shape{"steps": {MaxItems: 64}}}}}
	values, err := Check([]byte(doc), shape, Limits{MaxDepth: 8, MaxItems: 1024, MaxProperties: 1024, MaxValues: 1 << 20})
	var shapeErr *Error
	if !errors.As(err, &shapeErr) || shapeErr.Path != "spec.steps" {
		t.Fatalf("Check = %v; want the steps over their bound", err)
	}
	if values > 70 {
		t.Errorf("read %d values before refusing; want at most the bound and its parents", values)
	}
}

func TestFromSchemaAndUnion(t *testing.T) {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	v1 := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"steps": {Type: "array", MaxItems: ptr.To[int64](64), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}},
		"env":   {Type: "object", MaxProperties: ptr.To[int64](8), AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &str}},
		"free":  {Type: "object", XPreserveUnknownFields: ptr.To(true)},
	}}
	old := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"steps": {Type: "array", MaxItems: ptr.To[int64](32), Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &str}},
		"args":  {Type: "object", MaxProperties: ptr.To[int64](4)},
		"env":   {Type: "object"},
	}}
	s := FromSchema(v1)
	if s.Properties["steps"].MaxItems != 64 || s.Properties["env"].MaxProperties != 8 || s.Properties["free"] != nil {
		t.Fatalf("FromSchema = %+v", s)
	}
	u := Union(s, FromSchema(old))
	if got := u.Properties["steps"].MaxItems; got != 64 {
		t.Errorf("union of 64 and 32 items = %d; want 64", got)
	}
	if got := u.Properties["args"].MaxProperties; got != 4 {
		t.Errorf("a member of one version only = %d members; want that version's 4", got)
	}
	if got := u.Properties["env"].MaxProperties; got != 0 {
		t.Errorf("a map bounded in one version only = %d members; want no bound of its own", got)
	}
}
