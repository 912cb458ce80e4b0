package celjson

import (
	"bytes"
	"reflect"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/ndsl-cn/pipeline-operator/internal/router/jsonscan"
)

// Value is the CEL value of a JSON document, nil when it does not parse. Its objects and
// arrays are read from the document's text as an expression reads them: a member is found, or
// an array's elements counted, without decoding the rest. The values are those of the decoded
// document in every other way; the document must outlive them.
//
// Reading in place costs what CEL's cost model does not see (a member found by going over the
// text before it), so it is bounded: once the text read in place adds up to
// jsonReadAllowance times the document, the document is decoded, once, and everything is read
// from the decoded values. What needs a whole object or array (equality, iteration, a
// conversion) takes it from that decoded document too. Each member is read at most once.
func Value(doc []byte) ref.Val {
	if !Valid(doc) {
		return nil
	}
	text := bytes.TrimSpace(doc)
	switch text[0] {
	case '{', '[':
		d := &jsonDoc{allowance: jsonReadAllowance * len(text)}
		return d.container(nil, nil, text)
	}
	return decodedJSON(text)
}

// jsonReadAllowance is how many times over its text a document may be read in place before it
// is decoded.
const jsonReadAllowance = 2

// jsonDoc is what the values read from one document share.
type jsonDoc struct {
	// allowance is how many more bytes of text may be read in place.
	allowance int
	// scanned counts the bytes of text gone over in place, decodes the decodings of the
	// document: what reading it took.
	scanned, decodes int
}

// read takes n bytes from the allowance. When fewer are left it reports false and spends
// them: from then on the document is read decoded.
func (d *jsonDoc) read(n int) bool {
	if n > d.allowance {
		d.allowance = 0
		return false
	}
	d.allowance -= n
	return true
}

// container is the object or array whose valid text is text, selected by selector from
// parent (nil for the document itself).
func (d *jsonDoc) container(parent *jsonContainer, selector ref.Val, text []byte) ref.Val {
	c := jsonContainer{doc: d, parent: parent, selector: selector, text: text, size: -1}
	if text[0] == '{' {
		return &jsonObject{jsonContainer: c}
	}
	return &jsonArray{jsonContainer: c}
}

// decodedJSON is the value of the valid JSON text v, decoded.
func decodedJSON(v []byte) ref.Val {
	d, _ := Decode(v)
	return types.DefaultTypeAdapter.NativeToValue(d)
}

// span is where a value is in a container's text.
type span struct{ start, end int }

// jsonContainer is what an object and an array share: their text, where their members are,
// and where they are in the document.
type jsonContainer struct {
	doc *jsonDoc
	// parent is the container this one is a member of (nil for the document), selector its key
	// there (a string) or its index (an int).
	parent   *jsonContainer
	selector ref.Val
	text     []byte
	members  []jsonMember
	indexed  bool
	// byKey finds an object's members by key when it has many (of duplicates, the last).
	byKey map[string]int
	// size is the number of elements of an array once counted, -1 before.
	size    int
	decoded ref.Val
}

// jsonMember is an array's element, or an object's member, its key decoded; val is its value
// once read.
type jsonMember struct {
	key   string
	value span
	val   ref.Val
}

// manyMembers is how many members an object has before they are found by a map.
const manyMembers = 16

// whole is the container decoded: the document decoded once, and this container selected in it.
func (c *jsonContainer) whole() ref.Val {
	if c.decoded == nil {
		if c.parent == nil {
			c.doc.decodes++
			c.decoded = decodedJSON(c.text)
		} else {
			c.decoded = c.parent.whole().(traits.Indexer).Get(c.selector)
		}
	}
	return c.decoded
}

// inPlace reports whether the container is read in place: its members found already, or the
// allowance still covering the reading of its text.
func (c *jsonContainer) inPlace() bool {
	return c.decoded == nil && (c.indexed || c.doc.read(len(c.text)))
}

// walk reads the container's members in order, calling f with each (the key's span is empty
// in an array). The text is valid JSON: the members are skipped, not checked again.
func (c *jsonContainer) walk(f func(key, value span)) {
	b := c.text
	c.doc.scanned += len(b)
	i := jsonscan.SkipSpace(b, 1)
	if b[i] == ']' || b[i] == '}' {
		return
	}
	object := b[0] == '{'
	for {
		var key, value span
		i = jsonscan.SkipSpace(b, i)
		if object {
			key.start = i
			i = jsonscan.StringEnd(b, i+1) + 1
			key.end = i
			i = jsonscan.SkipSpace(b, jsonscan.SkipSpace(b, i)+1) // the colon, and the space around it
		}
		value.start = i
		i = jsonscan.SkipValue(b, i)
		value.end = i
		f(key, value)
		i = jsonscan.SkipSpace(b, i)
		if b[i] != ',' {
			return
		}
		i++
	}
}

// index finds where the members are, once; inPlace must have held.
func (c *jsonContainer) index() []jsonMember {
	if c.indexed {
		return c.members
	}
	c.indexed = true
	object := c.text[0] == '{'
	c.walk(func(key, value span) {
		m := jsonMember{value: value}
		if object {
			m.key = decodeKey(c.text[key.start:key.end])
		}
		c.members = append(c.members, m)
	})
	c.size = len(c.members)
	if object && len(c.members) > manyMembers {
		c.byKey = make(map[string]int, len(c.members))
		for i, m := range c.members {
			c.byKey[m.key] = i
		}
	}
	return c.members
}

// decodeKey is the string a key's text (quoted) stands for: its text when it has no escapes
// and is valid UTF-8.
func decodeKey(quoted []byte) string {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw)
	}
	decoded, _ := Decode(quoted)
	return decoded.(string)
}

// member is the value of member i, read once: an object or array is read as it is read, a
// scalar decoded, or taken from the decoded document once the allowance is spent.
func (c *jsonContainer) member(i int) ref.Val {
	m := &c.members[i]
	if m.val == nil {
		var selector ref.Val = types.Int(i)
		if c.text[0] == '{' {
			selector = types.String(m.key)
		}
		v := c.text[m.value.start:m.value.end]
		switch {
		case v[0] == '{' || v[0] == '[':
			m.val = c.doc.container(c, selector, v)
		case c.doc.read(len(v)):
			c.doc.scanned += len(v)
			m.val = decodedJSON(v)
		default:
			m.val = c.whole().(traits.Indexer).Get(selector)
		}
	}
	return m.val
}

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
	if !ok || !o.inPlace() {
		return o.whole().(traits.Mapper).Find(key)
	}
	members := o.index()
	if o.byKey != nil {
		i, found := o.byKey[string(k)]
		if !found {
			return nil, false
		}
		return o.member(i), true
	}
	for i := len(members) - 1; i >= 0; i-- {
		if members[i].key == string(k) {
			return o.member(i), true
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
	if a.size < 0 {
		if !a.inPlace() {
			return a.whole().(traits.Sizer).Size()
		}
		n := 0
		a.walk(func(span, span) { n++ })
		a.size = n
	}
	return types.Int(a.size)
}

// Get implements traits.Indexer.
func (a *jsonArray) Get(index ref.Val) ref.Val {
	if n, ok := index.(types.Int); ok && int64(int(n)) != int64(n) {
		// Beyond an int (on a 32-bit platform): no element, as in the decoded list, which
		// takes an int index as an int64. GetOrError would wrap it, 1<<32 to 0.
		return types.NewErr("index out of bounds: %d", n)
	}
	i, err := types.GetOrError(index)
	if err == nil && i >= 0 && a.inPlace() {
		if members := a.index(); i < len(members) {
			return a.member(i)
		}
	}
	// A bad index, or the allowance spent: the decoded list's.
	return a.whole().(traits.Indexer).Get(index)
}

// Add implements traits.Adder.
func (a *jsonArray) Add(other ref.Val) ref.Val { return a.whole().(traits.Adder).Add(other) }
