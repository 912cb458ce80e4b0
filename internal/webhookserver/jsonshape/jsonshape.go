// Package jsonshape bounds what a JSON document can make a decoder build, before it is decoded:
// its nesting, the items of each array, the members of each object, the bytes of a value and
// the values of the whole document. Check reads the document once, token by token, in time
// linear in its size and memory bounded by its longest token, so that a forged body costs what
// its bytes cost and no more.
//
// A Shape says where a document may hold more or less than Limits' defaults; FromSchema derives
// one from a CustomResourceDefinition's OpenAPI schema (its maxItems and maxProperties), so that
// an object the CRD would refuse is refused here too.
package jsonshape

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Limits bound every document, where no Shape says otherwise.
type Limits struct {
	// MaxDepth bounds the nesting of arrays and objects.
	MaxDepth int
	// MaxItems bounds the items of an array whose Shape does not.
	MaxItems int
	// MaxProperties bounds the members of an object whose Shape does not.
	MaxProperties int
	// MaxValues bounds the values of the whole document: objects, arrays and scalars, not keys.
	MaxValues int
}

// Shape bounds a value and, through its members, the values it holds. A nil Shape bounds a
// value by Limits alone, and every value it holds too.
type Shape struct {
	// MaxItems bounds the items of an array; zero leaves it to Limits.MaxItems.
	MaxItems int
	// MaxProperties bounds the members of an object; zero leaves it to Limits.MaxProperties.
	MaxProperties int
	// MaxBytes bounds the encoded value; zero does not.
	MaxBytes int64
	// Items is the shape of each item of an array.
	Items *Shape
	// Properties are the shapes of an object's members by name.
	Properties map[string]*Shape
	// Additional is the shape of an object's members not in Properties.
	Additional *Shape
}

// Error says which bound a document is over, and where.
type Error struct {
	// Path is the value's path, as field paths are written: request.object.spec.steps[3].
	Path string
	// Detail says what is over which bound.
	Detail string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Detail
	}
	return e.Path + ": " + e.Detail
}

// frame is an array or object being read.
type frame struct {
	shape *Shape
	array bool
	// n is the items or members read so far; key the name of the member being read.
	n   int
	key string
	// wantKey is true when an object's next token is a member's name (or its end).
	wantKey bool
	start   int64
}

// Check reads the one JSON document of data against s and l; it returns the number of values
// the document holds, or an *Error naming the first bound it is over, or the syntax error.
func Check(data []byte, s *Shape, l Limits) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	c := checker{shape: s, limits: l}
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		switch {
		case errors.Is(err, io.EOF) && c.done:
			return c.values, nil
		case errors.Is(err, io.EOF):
			return c.values, io.ErrUnexpectedEOF
		case err != nil:
			return c.values, err
		case c.done:
			return c.values, errors.New("more than one JSON value")
		}
		if err := c.read(tok, start, dec.InputOffset()); err != nil {
			return c.values, err
		}
	}
}

// checker is the state of Check: the arrays and objects being read, and the values read.
type checker struct {
	shape  *Shape
	limits Limits
	stack  []frame
	values int
	// done is true once the document's value has been read.
	done bool
}

// read takes the token tok, which spans the bytes from start to end of the document.
func (c *checker) read(tok json.Token, start, end int64) error {
	if n := len(c.stack); n > 0 && c.stack[n-1].wantKey {
		if key, ok := tok.(string); ok {
			return c.member(key)
		}
	}
	if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
		closed := c.stack[len(c.stack)-1]
		c.stack = c.stack[:len(c.stack)-1]
		if err := fits(closed.shape, end-closed.start, c.stack); err != nil {
			return err
		}
		c.done = ended(c.stack)
		return nil
	}
	shape, err := c.value()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); ok {
		c.stack = append(c.stack, frame{shape: shape, array: d == '[', wantKey: d == '{', start: start})
		if c.limits.MaxDepth > 0 && len(c.stack) > c.limits.MaxDepth {
			return &Error{Path: path(c.stack[:len(c.stack)-1]), Detail: fmt.Sprintf("nested more than %d deep", c.limits.MaxDepth)}
		}
		return nil
	}
	if err := fits(shape, end-start, c.stack); err != nil {
		return err
	}
	c.done = ended(c.stack)
	return nil
}

// member takes the name of the next member of the object being read.
func (c *checker) member(key string) error {
	n := len(c.stack)
	top := &c.stack[n-1]
	top.key, top.wantKey = key, false
	top.n++
	if bound := or(top.shape, func(s *Shape) int { return s.MaxProperties }, c.limits.MaxProperties); bound > 0 && top.n > bound {
		return &Error{Path: path(c.stack[:n-1]), Detail: fmt.Sprintf("more than %d members", bound)}
	}
	return nil
}

// value counts a value that starts, as an item or a member of what is being read, and returns
// its shape.
func (c *checker) value() (*Shape, error) {
	c.values++
	if c.limits.MaxValues > 0 && c.values > c.limits.MaxValues {
		return nil, &Error{Detail: fmt.Sprintf("more than %d values", c.limits.MaxValues)}
	}
	n := len(c.stack)
	if n == 0 {
		return c.shape, nil
	}
	top := &c.stack[n-1]
	if top.array {
		top.n++
		if bound := or(top.shape, func(s *Shape) int { return s.MaxItems }, c.limits.MaxItems); bound > 0 && top.n > bound {
			return nil, &Error{Path: path(c.stack[:n-1]), Detail: fmt.Sprintf("more than %d items", bound)}
		}
	}
	return child(top), nil
}

// ended says whether the value just read was the document's, and marks the enclosing object
// ready for its next member.
func ended(stack []frame) bool {
	if len(stack) == 0 {
		return true
	}
	if top := &stack[len(stack)-1]; !top.array {
		top.wantKey = true
	}
	return false
}

// fits checks the bytes of a value just read, whose place stack gives, against its shape.
func fits(s *Shape, size int64, stack []frame) error {
	if s == nil || s.MaxBytes <= 0 || size <= s.MaxBytes {
		return nil
	}
	return &Error{Path: path(stack), Detail: fmt.Sprintf("more than %d bytes", s.MaxBytes)}
}

// child is the shape of the next value of top.
func child(top *frame) *Shape {
	switch {
	case top.shape == nil:
		return nil
	case top.array:
		return top.shape.Items
	}
	if s, ok := top.shape.Properties[top.key]; ok {
		return s
	}
	return top.shape.Additional
}

// or is the bound of s that get reads, or def when s is nil or does not set it.
func or(s *Shape, get func(*Shape) int, def int) int {
	if s != nil && get(s) > 0 {
		return get(s)
	}
	return def
}

// path is the path of the value the innermost frame of stack is reading: each frame's index
// or member name in turn.
func path(stack []frame) string {
	var b strings.Builder
	for i := range stack {
		switch f := &stack[i]; {
		case f.array:
			b.WriteString("[" + strconv.Itoa(f.n-1) + "]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
	}
	return b.String()
}
