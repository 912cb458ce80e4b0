// Package celjson reads the JSON answers of steps for stopWhen: Decode gives the values
// encoding/json gives an `any`, without reflection; Value gives a CEL value that reads an
// object's member or an array's size from the document's text without decoding the rest;
// DecodeCost bounds, before decoding, the memory a decoded document takes.
package celjson

import (
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth is how deeply arrays and objects may nest, as in encoding/json.
const maxJSONDepth = 10000

var (
	errJSONSyntax = errors.New("invalid JSON")
	errJSONDepth  = errors.New("JSON nested too deeply")
	errJSONNumber = errors.New("JSON number out of range")
)

// Decode decodes doc into the values encoding/json.Unmarshal gives an `any`
// (map[string]any, []any, float64, string, bool and nil) and refuses what it refuses: the
// same grammar, nesting depth and number range; invalid UTF-8 in strings becomes U+FFFD, and
// of duplicate keys the last wins. It does not need reflection, and allocates each array and
// object once, at its final size.
func Decode(doc []byte) (any, error) {
	d := jsonDecoders.Get().(*jsonDecoder)
	defer d.reset()
	d.data, d.text = doc, string(doc)
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, errJSONSyntax
	}
	return v, nil
}

// Valid reports whether Decode would decode doc, without decoding it.
func Valid(doc []byte) bool {
	d := jsonDecoders.Get().(*jsonDecoder)
	defer d.reset()
	d.data, d.check = doc, true
	if _, err := d.value(); err != nil {
		return false
	}
	d.skipSpace()
	return d.pos == len(d.data)
}

// jsonDecoders keeps decoders' stacks from one document to the next.
var jsonDecoders = sync.Pool{New: func() any { return new(jsonDecoder) }}

// jsonDecoder reads one document. The members of the arrays and objects being read wait on
// its stacks until their container is complete.
type jsonDecoder struct {
	data []byte
	// text is data as a string, copied once: the strings without escapes are parts of it.
	text  string
	pos   int
	depth int
	// check is set when the decoder reads only to validate, or to find where values end: it
	// makes no value (strings are "", containers and numbers nil).
	check bool
	elems []any
	keys  []string
	// buf holds a string being unescaped.
	buf []byte
}

// reset forgets the document, and what the stacks held if decoding stopped at an error, and
// gives the decoder back to the pool. Stacks that grew large are dropped.
func (d *jsonDecoder) reset() {
	const keep = 1024
	if cap(d.elems) > keep || cap(d.keys) > keep || cap(d.buf) > keep {
		return
	}
	clear(d.elems[:cap(d.elems)])
	clear(d.keys[:cap(d.keys)])
	*d = jsonDecoder{elems: d.elems[:0], keys: d.keys[:0], buf: d.buf[:0]}
	jsonDecoders.Put(d)
}

func (d *jsonDecoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value reads one value, after optional white space.
func (d *jsonDecoder) value() (any, error) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return nil, errJSONSyntax
	}
	switch c := d.data[d.pos]; c {
	case '{':
		return d.object()
	case '[':
		return d.array()
	case '"':
		return d.string()
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return d.number()
		}
		return nil, errJSONSyntax
	}
}

func (d *jsonDecoder) literal(lit string) error {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return errJSONSyntax
	}
	d.pos += len(lit)
	return nil
}

// enter and leave count the containers open around the value being read.
func (d *jsonDecoder) enter() error {
	d.depth++
	if d.depth > maxJSONDepth {
		return errJSONDepth
	}
	d.pos++ // the opening bracket
	d.skipSpace()
	return nil
}

// next reads what follows a member of a container: a comma (true) or the closing bracket
// (false).
func (d *jsonDecoder) next(closing byte) (bool, error) {
	d.skipSpace()
	if d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ',':
			d.pos++
			return true, nil
		case closing:
			d.pos++
			d.depth--
			return false, nil
		}
	}
	return false, errJSONSyntax
}

func (d *jsonDecoder) array() (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	base := len(d.elems)
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		d.depth--
		return []any{}, nil
	}
	for {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		if !d.check {
			d.elems = append(d.elems, v)
		}
		more, err := d.next(']')
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	if d.check {
		return nil, nil
	}
	a := make([]any, len(d.elems)-base)
	copy(a, d.elems[base:])
	clear(d.elems[base:])
	d.elems = d.elems[:base]
	return a, nil
}

func (d *jsonDecoder) object() (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	base := len(d.keys)
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		d.depth--
		return map[string]any{}, nil
	}
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, errJSONSyntax
		}
		k, err := d.string()
		if err != nil {
			return nil, err
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, errJSONSyntax
		}
		d.pos++
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		if !d.check {
			d.keys = append(d.keys, k)
			d.elems = append(d.elems, v)
		}
		more, err := d.next('}')
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	if d.check {
		return nil, nil
	}
	keys := d.keys[base:]
	elems := d.elems[len(d.elems)-len(keys):]
	m := make(map[string]any, len(keys))
	for i, k := range keys {
		m[k] = elems[i]
	}
	clear(keys)
	clear(elems)
	d.keys = d.keys[:base]
	d.elems = d.elems[:len(d.elems)-len(keys)]
	return m, nil
}

// string reads a string from its opening quote. One without escapes or invalid UTF-8 is
// copied as it is; any other is unescaped in buf.
func (d *jsonDecoder) string() (string, error) {
	start := d.pos + 1
	for i := start; i < len(d.data); {
		if i+8 <= len(d.data) && plain8(binary.LittleEndian.Uint64(d.data[i:])) {
			i += 8
			continue
		}
		if plainJSON[d.data[i]] {
			i++
			continue
		}
		switch c := d.data[i]; {
		case c == '"':
			d.pos = i + 1
			if d.check {
				return "", nil
			}
			return d.text[start:i], nil
		case c == '\\' || c < ' ':
			return d.unescape(start, i)
		default:
			r, size := utf8.DecodeRune(d.data[i:])
			if r == utf8.RuneError && size == 1 {
				return d.unescape(start, i)
			}
			i += size
		}
	}
	return "", errJSONSyntax
}

// plainJSON tells the bytes a string holds as they are: ASCII but control characters, the
// quote and the backslash.
var plainJSON = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plain8 reports whether the eight bytes of w are all plain (see plainJSON), eight at a time:
// none is below 0x20, a quote, a backslash or above 0x7f. A byte is below n when subtracting n
// from it borrows (sets its high bit) while its own high bit was clear; it is zero when it is
// below 1.
func plain8(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quotes, backslashes := w^('"'*ones), w^('\\'*ones)
	control := (w - ' '*ones) &^ w
	quote := (quotes - ones) &^ quotes
	backslash := (backslashes - ones) &^ backslashes
	return (control|quote|backslash|w)&highs == 0
}

// unescape reads the rest of a string whose bytes from start to i need no change.
func (d *jsonDecoder) unescape(start, i int) (string, error) {
	b := append(d.buf[:0], d.data[start:i]...)
	defer func() { d.buf = b[:0] }()
	for i < len(d.data) {
		c := d.data[i]
		switch {
		case c == '"':
			d.pos = i + 1
			if d.check {
				return "", nil
			}
			return string(b), nil
		case c < ' ':
			return "", errJSONSyntax
		case c == '\\':
			if i+1 >= len(d.data) {
				return "", errJSONSyntax
			}
			switch e := d.data[i+1]; e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(d.data[i+2:])
				if r < 0 {
					return "", errJSONSyntax
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A valid pair is one rune; anything else is U+FFFD for the first half,
					// and what follows is read on its own.
					if dec := utf16.DecodeRune(r, escapedRune(d.data[i:])); dec != unicode.ReplacementChar {
						b = utf8.AppendRune(b, dec)
						i += 6
						continue
					}
					r = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, r)
				continue
			default:
				return "", errJSONSyntax
			}
			i += 2
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			// Invalid UTF-8 becomes U+FFFD, one for each byte that starts no rune.
			r, size := utf8.DecodeRune(d.data[i:])
			b = utf8.AppendRune(b, r)
			i += size
		}
	}
	return "", errJSONSyntax
}

// escapedRune is the rune of a \uXXXX escape at the start of s, -1 when there is none.
func escapedRune(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	return hex4(s[2:])
}

// hex4 is the value of the four hexadecimal digits at the start of s, -1 when they are not.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// number reads a number as a float64.
func (d *jsonDecoder) number() (any, error) {
	start := d.pos
	integer, end, ok := scanNumber(d.data, start)
	if !ok {
		return nil, errJSONSyntax
	}
	d.pos = end
	if d.check && end == integer && end-start < 300 {
		// An integer of fewer than 300 digits is within a float64's range.
		return nil, nil
	}
	digits := start
	if d.data[start] == '-' {
		digits++
	}
	// An integer of at most 15 digits is exact in a float64: no need to parse it as text.
	if end == integer && end-digits <= 15 {
		var f float64
		for _, c := range d.data[digits:end] {
			f = f*10 + float64(c-'0')
		}
		if digits > start {
			f = -f
		}
		return f, nil
	}
	f, err := strconv.ParseFloat(string(d.data[start:end]), 64)
	if err != nil {
		return nil, errJSONNumber
	}
	if d.check {
		return nil, nil
	}
	return f, nil
}

// scanNumber finds the end of the number -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? that
// starts at i, and the end of its integer part.
func scanNumber(b []byte, i int) (integer, end int, ok bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return 0, 0, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return 0, 0, false
	}
	integer = i
	if i < len(b) && b[i] == '.' {
		if i = skipDigits(b, i+1); i == integer+1 {
			return 0, 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		exp := i
		if i = skipDigits(b, i); i == exp {
			return 0, 0, false
		}
	}
	return integer, i, true
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
