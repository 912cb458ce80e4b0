package oip

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// elements are the fixed-size datatypes of the binary data extension: the size of one element,
// how it reads (little-endian) and how an element as it reads is appended in that form (none
// for FP16 and BF16, which the router never writes).
var elements = map[string]struct {
	size   int
	read   func([]byte) any
	append func([]byte, any) []byte
}{
	"BOOL": {1, func(e []byte) any { return e[0] != 0 }, func(b []byte, v any) []byte {
		if v.(bool) {
			return append(b, 1)
		}
		return append(b, 0)
	}},
	"INT8":   {1, func(e []byte) any { return int64(int8(e[0])) }, func(b []byte, v any) []byte { return append(b, byte(v.(int64))) }},
	"UINT8":  {1, func(e []byte) any { return int64(e[0]) }, func(b []byte, v any) []byte { return append(b, byte(v.(int64))) }},
	"INT16":  {2, func(e []byte) any { return int64(int16(le.Uint16(e))) }, func(b []byte, v any) []byte { return le.AppendUint16(b, uint16(v.(int64))) }},
	"UINT16": {2, func(e []byte) any { return int64(le.Uint16(e)) }, func(b []byte, v any) []byte { return le.AppendUint16(b, uint16(v.(int64))) }},
	"INT32":  {4, func(e []byte) any { return int64(int32(le.Uint32(e))) }, func(b []byte, v any) []byte { return le.AppendUint32(b, uint32(v.(int64))) }},
	"UINT32": {4, func(e []byte) any { return int64(le.Uint32(e)) }, func(b []byte, v any) []byte { return le.AppendUint32(b, uint32(v.(int64))) }},
	"INT64":  {8, func(e []byte) any { return int64(le.Uint64(e)) }, func(b []byte, v any) []byte { return le.AppendUint64(b, uint64(v.(int64))) }},
	"UINT64": {8, func(e []byte) any { return le.Uint64(e) }, func(b []byte, v any) []byte { return le.AppendUint64(b, v.(uint64)) }},
	"FP16":   {2, func(e []byte) any { return halfToFloat(le.Uint16(e)) }, nil},
	"BF16":   {2, func(e []byte) any { return float64(math.Float32frombits(uint32(le.Uint16(e)) << 16)) }, nil},
	"FP32": {4, func(e []byte) any { return float64(math.Float32frombits(le.Uint32(e))) }, func(b []byte, v any) []byte {
		return le.AppendUint32(b, math.Float32bits(float32(v.(float64))))
	}},
	"FP64": {8, func(e []byte) any { return math.Float64frombits(le.Uint64(e)) }, func(b []byte, v any) []byte {
		return le.AppendUint64(b, math.Float64bits(v.(float64)))
	}},
}

var le = binary.LittleEndian

// Elements is how many values a tensor of shape holds, -1 when the shape has a negative
// dimension or overflows.
func Elements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt64/d) {
			return -1
		}
		n *= d
	}
	return n
}

// Decode is the tensor's data (for a binary tensor, in binary, the bytes after the JSON
// document) as a flat list in row-major order: int64 for the INT datatypes
// and UINT8 to UINT32, uint64 for UINT64, float64 for FP, bool for BOOL, string for BYTES. maxElements bounds how many it
// decodes: a tensor that has more is refused.
func Decode(t *Tensor, binary []byte, maxElements int64) ([]any, error) {
	n := Elements(t.Shape)
	if n < 0 {
		return nil, fmt.Errorf("tensor %s: shape %s is not a size", t.Name, FormatShape(t.Shape))
	}
	if n > maxElements {
		return nil, fmt.Errorf("tensor %s: %d elements, at most %d are decoded", t.Name, n, maxElements)
	}
	var out []any
	var err error
	if t.Binary {
		data, berr := binaryData(t, binary)
		if berr != nil {
			return nil, berr
		}
		out, err = decodeBinary(t, data, n)
	} else {
		out, err = decodeJSON(t, n)
	}
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	return out, nil
}

// binaryData is the bytes of binary tensor t among binary, the bytes after its document.
func binaryData(t *Tensor, binary []byte) ([]byte, error) {
	if t.Offset+t.Size > int64(len(binary)) {
		return nil, fmt.Errorf("tensor %s: its %d bytes at %d are not in the %d bytes of binary data", t.Name, t.Size, t.Offset, len(binary))
	}
	return binary[t.Offset : t.Offset+t.Size], nil
}

// decodeJSON reads the elements of a JSON tensor token by token, so that data longer than its
// shape is refused at its first element too many, with no more than n elements held.
func decodeJSON(t *Tensor, n int64) ([]any, error) {
	out := make([]any, 0, n)
	err := eachJSON(t, n, func(e any) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// eachJSON gives f the n elements of a JSON tensor one by one, decoded as Decode does: data
// longer than its shape is refused at its first element too many.
func eachJSON(t *Tensor, n int64, f func(any) error) error {
	dec := json.NewDecoder(bytes.NewReader(t.Data))
	dec.UseNumber()
	depth, seen := 0, int64(0)
	for {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("data: %w", err)
		}
		switch tok {
		case json.Delim('['):
			depth++
		case json.Delim(']'):
			depth--
		case json.Delim('{'), json.Delim('}'):
			return fmt.Errorf("data: an object is not a %s element", t.Datatype)
		default:
			if seen == n {
				return fmt.Errorf("data has more than the %d elements of shape %s", n, FormatShape(t.Shape))
			}
			e, err := jsonElement(t.Datatype, tok)
			if err != nil {
				return err
			}
			if err := f(e); err != nil {
				return err
			}
			seen++
		}
		if depth == 0 {
			break
		}
	}
	if dec.More() {
		return errors.New("data: more than one JSON value")
	}
	if seen != n {
		return fmt.Errorf("data has %d elements, shape %s has %d", seen, FormatShape(t.Shape), n)
	}
	return nil
}

// jsonElement is one decoded element of datatype.
func jsonElement(datatype string, v any) (any, error) {
	switch datatype {
	case "BOOL":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "BYTES":
		if s, ok := v.(string); ok {
			return s, nil
		}
	case "FP16", "BF16", "FP32", "FP64":
		if num, ok := v.(json.Number); ok {
			if f, err := num.Float64(); err == nil {
				return f, nil
			}
		}
	case "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32":
		if num, ok := v.(json.Number); ok {
			if i, err := num.Int64(); err == nil {
				return i, nil
			}
		}
	case "UINT64":
		if num, ok := v.(json.Number); ok {
			if u, err := strconv.ParseUint(num.String(), 10, 64); err == nil {
				return u, nil
			}
		}
	default:
		return nil, fmt.Errorf("datatype %q is not one of the protocol's", datatype)
	}
	return nil, fmt.Errorf("%v is not a %s element", v, datatype)
}

func decodeBinary(t *Tensor, data []byte, n int64) ([]any, error) {
	out := make([]any, 0, n)
	_, err := eachBinary(t, data, n, func(e any) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// eachBinary gives f the n elements of a binary tensor's data one by one, decoded as Decode
// does, and reports how many there were: data that holds other than n is refused.
func eachBinary(t *Tensor, data []byte, n int64, f func(any) error) (int64, error) {
	if t.Datatype == "BYTES" {
		// Each element is its length (4 bytes, little-endian) and its bytes.
		seen := int64(0)
		for len(data) > 0 {
			if seen == n {
				return seen, fmt.Errorf("more than the %d elements of shape %s", n, FormatShape(t.Shape))
			}
			if len(data) < 4 {
				return seen, fmt.Errorf("%d bytes left where an element's length is", len(data))
			}
			l := binary.LittleEndian.Uint32(data)
			if int64(l) > int64(len(data)-4) {
				return seen, fmt.Errorf("an element of %d bytes, %d are left", l, len(data)-4)
			}
			if err := f(string(data[4 : 4+l])); err != nil {
				return seen, err
			}
			seen++
			data = data[4+l:]
		}
		if seen != n {
			return seen, fmt.Errorf("%d elements, shape %s has %d", seen, FormatShape(t.Shape), n)
		}
		return seen, nil
	}
	el, ok := elements[t.Datatype]
	if !ok {
		return 0, fmt.Errorf("datatype %q is not one of the protocol's", t.Datatype)
	}
	if n > math.MaxInt64/int64(el.size) {
		return 0, fmt.Errorf("%d bytes, shape %s of %s has more than any body", len(data), FormatShape(t.Shape), t.Datatype)
	}
	if int64(len(data)) != n*int64(el.size) {
		return 0, fmt.Errorf("%d bytes, shape %s of %s has %d", len(data), FormatShape(t.Shape), t.Datatype, n*int64(el.size))
	}
	for i := range n {
		if err := f(el.read(data[i*int64(el.size) : (i+1)*int64(el.size)])); err != nil {
			return i, err
		}
	}
	return n, nil
}

// halfToFloat is the IEEE 754 half-precision number h.
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}
