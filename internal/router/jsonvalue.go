package router

import (
	"bytes"
	"reflect"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// jsonValue is the CEL value of a JSON document, nil when it does not parse. Its objects and
// arrays are read from the document's text as an expression reads them: a member is found, or
// an array's elements counted, without decoding the rest. What needs a whole object or array
// (equality, iteration, a conversion) decodes that part as parseJSON does, once. The values
// are those of the decoded document in every other way; the document must outlive them.
func jsonValue(doc []byte) ref.Val {
	if !validJSON(doc) {
		return nil
	}
	return jsonValueAt(bytes.TrimSpace(doc))
}

// jsonValueAt is the value of the valid JSON text v, without white space around it.
func jsonValueAt(v []byte) ref.Val {
	switch v[0] {
	case '{':
		return &jsonObject{jsonContainer: jsonContainer{text: v}}
	case '[':
		return &jsonArray{jsonContainer: jsonContainer{text: v}}
	}
	return decodedJSON(v)
}

// decodedJSON is the value of the valid JSON text v, decoded.
func decodedJSON(v []byte) ref.Val {
	d, _ := parseJSON(v)
	return types.DefaultTypeAdapter.NativeToValue(d)
}

// span is where a value is in a container's text.
type span struct{ start, end int }

// jsonContainer is what an object and an array share: their text, where their members are,
// and the decoded value, for what needs all of it.
type jsonContainer struct {
	text    []byte
	members []jsonMember
	indexed bool
	decoded ref.Val
}

// jsonMember is an array's element, or an object's member and the text of its key (with the
// quotes).
type jsonMember struct {
	key, value span
}

// whole is the container decoded.
func (c *jsonContainer) whole() ref.Val {
	if c.decoded == nil {
		c.decoded = decodedJSON(c.text)
	}
	return c.decoded
}

// walk reads the container's members in order, calling f with each (the key's span is empty
// in an array) until it returns false. The text is valid JSON: the members are skipped, not
// checked again.
func (c *jsonContainer) walk(f func(jsonMember) bool) {
	b := c.text
	i := skipSpaceAt(b, 1)
	if b[i] == ']' || b[i] == '}' {
		return
	}
	object := b[0] == '{'
	for {
		var m jsonMember
		i = skipSpaceAt(b, i)
		if object {
			m.key.start = i
			i = stringEnd(b, i+1) + 1
			m.key.end = i
			i = skipSpaceAt(b, skipSpaceAt(b, i)+1) // the colon, and the space around it
		}
		m.value.start = i
		i = skipValue(b, i)
		m.value.end = i
		if !f(m) {
			return
		}
		i = skipSpaceAt(b, i)
		if b[i] != ',' {
			return
		}
		i++
	}
}

// skipValue is the end of the valid JSON value that starts at b[i]: strings are skipped to
// their closing quote, containers to their closing bracket, numbers and literals to the
// next delimiter.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i+1) + 1
	case '{', '[':
		for depth := 0; ; i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i+1)
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !jsonDelimiter[b[i]] {
		i++
	}
	return i
}

// jsonDelimiter tells the bytes that end a number or a literal in valid JSON.
var jsonDelimiter = func() (t [256]bool) {
	for _, c := range " \t\n\r,]}" {
		t[c] = true
	}
	return t
}()

// skipSpaceAt is the index of the first byte from i on that is not JSON white space.
func skipSpaceAt(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// index finds where the members are, once.
func (c *jsonContainer) index() []jsonMember {
	if !c.indexed {
		c.indexed = true
		c.walk(func(m jsonMember) bool {
			c.members = append(c.members, m)
			return true
		})
	}
	return c.members
}

func (c *jsonContainer) at(s span) ref.Val { return jsonValueAt(c.text[s.start:s.end]) }

// ConvertToNative implements ref.Val.
func (c *jsonContainer) ConvertToNative(t reflect.Type) (any, error) {
	return c.whole().ConvertToNative(t)
}

// ConvertToType implements ref.Val.
func (c *jsonContainer) ConvertToType(t ref.Type) ref.Val { return c.whole().ConvertToType(t) }

// Equal implements ref.Val.
func (c *jsonContainer) Equal(other ref.Val) ref.Val { return c.whole().Equal(other) }

// Value implements ref.Val.
func (c *jsonContainer) Value() any { return c.whole().Value() }

// Contains implements traits.Container.
func (c *jsonContainer) Contains(v ref.Val) ref.Val { return c.whole().(traits.Container).Contains(v) }

// Iterator implements traits.Iterable.
func (c *jsonContainer) Iterator() traits.Iterator { return c.whole().(traits.Iterable).Iterator() }

// jsonObject is a JSON object as a CEL map: it finds a member by its key in the text.
type jsonObject struct {
	jsonContainer
}

var _ traits.Mapper = (*jsonObject)(nil)

// Type implements ref.Val.
func (o *jsonObject) Type() ref.Type { return types.MapType }

// Size implements traits.Sizer: the number of distinct keys, from the decoded object.
func (o *jsonObject) Size() ref.Val { return o.whole().(traits.Sizer).Size() }

// Find implements traits.Mapper. Of duplicate keys the last wins, as when decoded.
func (o *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return o.whole().(traits.Mapper).Find(key)
	}
	members := o.index()
	for i := len(members) - 1; i >= 0; i-- {
		if o.keyIs(members[i].key, string(k)) {
			return o.at(members[i].value), true
		}
	}
	return nil, false
}

// Get implements traits.Indexer.
func (o *jsonObject) Get(key ref.Val) ref.Val {
	if v, found := o.Find(key); found {
		return v
	}
	return o.whole().(traits.Indexer).Get(key)
}

// keyIs reports whether the key whose text (quoted) is at s is k. A key without escapes
// and in valid UTF-8 is its text; any other is compared decoded.
func (o *jsonObject) keyIs(s span, k string) bool {
	raw := o.text[s.start+1 : s.end-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw) == k
	}
	decoded, _ := parseJSON(o.text[s.start:s.end])
	return decoded == k
}

// jsonArray is a JSON array as a CEL list: it counts its elements, and finds one by its
// index, in the text.
type jsonArray struct {
	jsonContainer
}

var _ traits.Lister = (*jsonArray)(nil)

// Type implements ref.Val.
func (a *jsonArray) Type() ref.Type { return types.ListType }

// Size implements traits.Sizer.
func (a *jsonArray) Size() ref.Val {
	if a.indexed {
		return types.Int(len(a.members))
	}
	n := 0
	a.walk(func(jsonMember) bool {
		n++
		return true
	})
	return types.Int(n)
}

// Get implements traits.Indexer.
func (a *jsonArray) Get(index ref.Val) ref.Val {
	i, err := types.GetOrError(index)
	if members := a.index(); err == nil && i >= 0 && i < len(members) {
		return a.at(members[i].value)
	}
	// A bad index: the decoded list's error.
	return a.whole().(traits.Indexer).Get(index)
}

// Add implements traits.Adder.
func (a *jsonArray) Add(other ref.Val) ref.Val { return a.whole().(traits.Adder).Add(other) }
