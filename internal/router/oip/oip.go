// Package oip reads and writes the bodies of the Open Inference Protocol (KServe v2
// inference protocol) that the router maps tensors between: the inputs of a request, the
// outputs of an answer, JSON data or the binary data extension, and a model's metadata.
//
// Tensor data is not decoded to be moved: a JSON tensor's data is carried as the JSON text it
// was, a binary tensor's as its bytes. Decode turns either into values when a stopWhen
// expression reads them. A Reader reads a body's tensors within bounds (their number, the rank
// of their shapes), charging a budget what it holds before it holds it; WriteRequest writes a
// request in pieces, into a buffer that counts them.
package oip

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
)

// HeaderInferenceHeaderLength is the header of a body under the binary data extension: the
// length of the JSON document that starts the body, the tensors' bytes following it.
const HeaderInferenceHeaderLength = "Inference-Header-Content-Length"

// binaryDataSize is the parameter of a tensor whose data follows the JSON document, in bytes.
const binaryDataSize = "binary_data_size"

// Tensor is one input of a request or output of an answer.
type Tensor struct {
	Name     string  `json:"name"`
	Shape    []int64 `json:"shape"`
	Datatype string  `json:"datatype"`
	// Parameters are the tensor's parameters as they were, binary_data_size aside.
	Parameters map[string]json.RawMessage `json:"parameters,omitempty"`
	// Data is the tensor's data as JSON text, nil for a binary tensor. A Reader leaves it, and
	// the parameters' values, in the document it read: valid while that is.
	Data json.RawMessage `json:"data,omitempty"`
	// Binary says that the tensor's data is bytes after the JSON document (the binary data
	// extension): Size bytes, Offset bytes after the document's end.
	Binary       bool  `json:"-"`
	Offset, Size int64 `json:"-"`
}

// Split cuts a body whose Inference-Header-Content-Length is headerLength (negative when it
// has none) into its JSON document and the bytes of its binary tensors.
func Split(data []byte, headerLength int64) (doc, binary []byte, err error) {
	if headerLength < 0 {
		return data, nil, nil
	}
	if headerLength > int64(len(data)) {
		return nil, nil, fmt.Errorf("%s is %d, the body has %d bytes", HeaderInferenceHeaderLength, headerLength, len(data))
	}
	return data[:headerLength], data[headerLength:], nil
}

// ParseHeaderLength reads an Inference-Header-Content-Length value: -1 when v is empty.
func ParseHeaderLength(v string) (int64, error) {
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q is not a length", HeaderInferenceHeaderLength, v)
	}
	return n, nil
}

// Find is the tensor of tensors named name.
func Find(tensors []Tensor, name string) (*Tensor, bool) {
	for i := range tensors {
		if tensors[i].Name == name {
			return &tensors[i], true
		}
	}
	return nil, false
}

// AppendRequest appends to dst the JSON document of the request whose inputs are inputs, each
// under its own name, and reports whether some input is binary: the document is then the
// body's header (its Inference-Header-Content-Length is its length), and the bytes of the
// binary inputs follow it in their order. When binaryOutput is true the request asks for the
// answer's tensors as binary data.
func AppendRequest(dst []byte, inputs []Tensor, binaryOutput bool) ([]byte, bool) {
	w := appender{b: dst}
	binary, _ := WriteRequest(&w, inputs, nil, binaryOutput)
	return w.b, binary
}

// appender is a writer that appends to b.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// WriteRequest writes to w the JSON document AppendRequest makes, in pieces: it holds no more of
// it than a few hundred bytes besides what w holds (the tensors' data and parameters go to w
// as they are). When outputs are named the request asks for those alone.
func WriteRequest(w io.Writer, inputs []Tensor, outputs []string, binaryOutput bool) (bool, error) {
	d := docWriter{w: w, buf: make([]byte, 0, docBuffer)}
	d.text(`{"inputs":`)
	binary := d.tensors(inputs)
	if len(outputs) > 0 {
		d.text(`,"outputs":[`)
		for i, name := range outputs {
			if i > 0 {
				d.text(",")
			}
			d.text(`{"name":`)
			d.string(name)
			d.text("}")
		}
		d.text("]")
	}
	if binaryOutput {
		d.text(`,"parameters":{"binary_data_output":true}`)
	}
	d.text("}")
	d.flush()
	return binary, d.err
}

// WriteResponse writes to w, in pieces as WriteRequest does, the JSON document of the answer of
// the model modelName whose outputs are outputs, each under its own name, and reports whether
// some output is binary: the document is then the body's header, and the bytes of the binary
// outputs follow it in their order.
func WriteResponse(w io.Writer, modelName string, outputs []Tensor) (bool, error) {
	d := docWriter{w: w, buf: make([]byte, 0, docBuffer)}
	d.text(`{"model_name":`)
	d.string(modelName)
	d.text(`,"outputs":`)
	binary := d.tensors(outputs)
	d.text("}")
	d.flush()
	return binary, d.err
}

// tensors writes the list of tensors, each under its own name, and reports whether some tensor
// is binary.
func (d *docWriter) tensors(tensors []Tensor) bool {
	d.text("[")
	binary := false
	for i := range tensors {
		t := &tensors[i]
		if i > 0 {
			d.text(",")
		}
		d.text(`{"name":`)
		d.string(t.Name)
		d.text(`,"shape":[`)
		for j, n := range t.Shape {
			if j > 0 {
				d.text(",")
			}
			d.buf = strconv.AppendInt(d.buf, n, 10)
		}
		d.text(`],"datatype":`)
		d.string(t.Datatype)
		if len(t.Parameters) > 0 || t.Binary {
			d.text(`,"parameters":{`)
			n := 0
			for _, k := range slices.Sorted(maps.Keys(t.Parameters)) {
				if n > 0 {
					d.text(",")
				}
				d.string(k)
				d.text(":")
				d.raw(t.Parameters[k])
				n++
			}
			if t.Binary {
				if n > 0 {
					d.text(",")
				}
				d.text(`"` + binaryDataSize + `":`)
				d.buf = strconv.AppendInt(d.buf, t.Size, 10)
				binary = true
			}
			d.text("}")
		}
		if !t.Binary {
			d.text(`,"data":`)
			d.raw(t.Data)
		}
		d.text("}")
	}
	d.text("]")
	return binary
}

// docBuffer is how much of a document docWriter holds before it writes it.
const docBuffer = 512

// docWriter writes a document in pieces: short ones gathered in buf, long ones as they are.
// Its first error stops it.
type docWriter struct {
	w   io.Writer
	buf []byte
	err error
}

func (d *docWriter) text(s string) { d.buf = append(d.buf, s...) }

func (d *docWriter) string(s string) {
	if len(s) > docBuffer {
		d.flush()
	}
	d.buf = appendString(d.buf, s)
	if len(d.buf) > docBuffer {
		d.flush()
	}
}

// raw writes p, JSON text: a long one straight to w.
func (d *docWriter) raw(p []byte) {
	if len(p) < docBuffer {
		d.buf = append(d.buf, p...)
		return
	}
	d.flush()
	if d.err == nil {
		_, d.err = d.w.Write(p)
	}
}

// flush writes what buf holds.
func (d *docWriter) flush() {
	if d.err == nil && len(d.buf) > 0 {
		_, d.err = d.w.Write(d.buf)
	}
	d.buf = d.buf[:0]
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	simple := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			simple = false
			break
		}
	}
	if simple {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	q, _ := json.Marshal(s) // a string always marshals
	return append(dst, q...)
}

// ModelMetadata is what a server says of a model (GET /v2/models/<name>).
type ModelMetadata struct {
	Name    string           `json:"name"`
	Inputs  []TensorMetadata `json:"inputs"`
	Outputs []TensorMetadata `json:"outputs"`
}

// TensorMetadata is a model's description of one of its tensors. A dimension of -1 is of any
// size.
type TensorMetadata struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// ParseModelMetadata reads a model metadata answer.
func ParseModelMetadata(data []byte) (*ModelMetadata, error) {
	var m ModelMetadata
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not Open Inference Protocol model metadata: %w", err)
	}
	if m.Inputs == nil && m.Outputs == nil {
		return nil, errors.New("not Open Inference Protocol model metadata: neither inputs nor outputs")
	}
	return &m, nil
}

// tensorMetadata is the description of the tensor named name among tensors.
func tensorMetadata(tensors []TensorMetadata, name string) (TensorMetadata, bool) {
	for _, t := range tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorMetadata{}, false
}

// Input is the model's input named name.
func (m *ModelMetadata) Input(name string) (TensorMetadata, bool) {
	return tensorMetadata(m.Inputs, name)
}

// Output is the model's output named name.
func (m *ModelMetadata) Output(name string) (TensorMetadata, bool) {
	return tensorMetadata(m.Outputs, name)
}

// Fits says why a tensor described by from cannot be the input described by to: their
// datatypes differ, or their shapes cannot be the same (ranks differ, or a dimension both know
// differs). nil when it can.
func Fits(from, to TensorMetadata) error {
	if from.Datatype != to.Datatype {
		return fmt.Errorf("datatype %s, the input is %s", quoteIfOdd(from.Datatype), quoteIfOdd(to.Datatype))
	}
	if !shapesFit(from.Shape, to.Shape) {
		return fmt.Errorf("shape %s, the input is %s", FormatShape(from.Shape), FormatShape(to.Shape))
	}
	return nil
}

// shapesFit reports whether a tensor of shape a may have shape b: the same rank, and every
// dimension equal where neither is -1.
func shapesFit(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && a[i] != -1 && b[i] != -1 {
			return false
		}
	}
	return true
}

// FormatShape writes a shape as [1,-1,3].
func FormatShape(shape []int64) string {
	b := []byte{'['}
	for i, d := range shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']'))
}

// quoteIfOdd is a datatype as it stands in a message: bare when it is one of the protocol's,
// else quoted and cut to 32 bytes (a server may send anything).
func quoteIfOdd(datatype string) string {
	if _, ok := elements[datatype]; ok || datatype == "BYTES" {
		return datatype
	}
	if len(datatype) > 32 {
		datatype = datatype[:32]
	}
	return strconv.Quote(datatype)
}
