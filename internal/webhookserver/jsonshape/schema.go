package jsonshape

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// FromSchema is the shape of the values s admits: the maxItems of its arrays and the
// maxProperties of its maps, through every property, item and additional property. What s
// leaves open (metadata, preserved unknown fields, an array without maxItems) is bounded by the
// Limits Check is given.
func FromSchema(s *apiextensionsv1.JSONSchemaProps) *Shape {
	if s == nil || ptrTrue(s.XPreserveUnknownFields) {
		return nil
	}
	shape := &Shape{}
	if s.MaxItems != nil {
		shape.MaxItems = int(*s.MaxItems)
	}
	if s.MaxProperties != nil {
		shape.MaxProperties = int(*s.MaxProperties)
	}
	if s.Items != nil {
		shape.Items = FromSchema(s.Items.Schema)
	}
	if len(s.Properties) > 0 {
		shape.Properties = make(map[string]*Shape, len(s.Properties))
		for name := range s.Properties {
			p := s.Properties[name]
			shape.Properties[name] = FromSchema(&p)
		}
	}
	if s.AdditionalProperties != nil {
		shape.Additional = FromSchema(s.AdditionalProperties.Schema)
	}
	return shape
}

// Union is a shape that admits what a or b admits: for the objects of a resource served in
// several versions, any of which a request may hold.
func Union(a, b *Shape) *Shape {
	if a == nil || b == nil {
		return nil
	}
	u := &Shape{
		MaxItems:      looser(a.MaxItems, b.MaxItems),
		MaxProperties: looser(a.MaxProperties, b.MaxProperties),
		MaxBytes:      looser(a.MaxBytes, b.MaxBytes),
		Items:         unionOrOne(a.Items, b.Items),
		Additional:    unionOrOne(a.Additional, b.Additional),
	}
	if len(a.Properties)+len(b.Properties) > 0 {
		u.Properties = make(map[string]*Shape, len(a.Properties)+len(b.Properties))
		for name, s := range a.Properties {
			u.Properties[name] = s
		}
		for name, s := range b.Properties {
			if prev, ok := u.Properties[name]; ok {
				u.Properties[name] = Union(prev, s)
			} else {
				u.Properties[name] = s
			}
		}
	}
	return u
}

// unionOrOne is the union of a and b where both describe the value, else the one that does.
func unionOrOne(a, b *Shape) *Shape {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return Union(a, b)
}

// looser is the looser of two bounds, where zero is no bound of the shape's own.
func looser[T int | int64](a, b T) T {
	if a == 0 || b == 0 {
		return 0
	}
	return max(a, b)
}

func ptrTrue(b *bool) bool { return b != nil && *b }
