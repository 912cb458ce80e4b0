package webhookserver

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver/jsonshape"
)

// ObjectShape is the shape of the objects of crd that a review may hold: the union of its
// served versions' schemas, since a ConversionReview holds objects of any of them.
func ObjectShape(crd *apiextensionsv1.CustomResourceDefinition) *jsonshape.Shape {
	var object *jsonshape.Shape
	first := true
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema == nil {
			continue
		}
		s := jsonshape.FromSchema(v.Schema.OpenAPIV3Schema)
		if first {
			object, first = s, false
			continue
		}
		object = jsonshape.Union(object, s)
	}
	return object
}

// admissionReview is the shape of an AdmissionReview of objects of the shape object, whose
// userInfo is at most userInfoBytes. The kube-apiserver's requesters have a handful of groups
// and extra values; the bounds leave room for identity providers that send many.
func admissionReview(object *jsonshape.Shape, userInfoBytes int64) *jsonshape.Shape {
	return &jsonshape.Shape{Properties: map[string]*jsonshape.Shape{
		"request": {Properties: map[string]*jsonshape.Shape{
			"object":    object,
			"oldObject": object,
			"userInfo": {MaxBytes: userInfoBytes, Properties: map[string]*jsonshape.Shape{
				"groups": {MaxItems: 256},
				"extra":  {MaxProperties: 32, Additional: &jsonshape.Shape{MaxItems: 32}},
			}},
		}},
	}}
}

// conversionReview is the shape of a ConversionReview of at most maxObjects objects of the
// shape object.
func conversionReview(object *jsonshape.Shape, maxObjects int) *jsonshape.Shape {
	return &jsonshape.Shape{Properties: map[string]*jsonshape.Shape{
		"request": {Properties: map[string]*jsonshape.Shape{
			"objects": {MaxItems: maxObjects, Items: object},
		}},
	}}
}
