package oip

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// GRPCTensor is a tensor of the protocol's gRPC messages: the fields an InferInputTensor and an
// InferOutputTensor share. Its data is Contents, or when nil the raw contents of its message at
// its position.
type GRPCTensor struct {
	Name       string
	Datatype   string
	Shape      []int64
	Parameters map[string]*inferencepb.InferParameter
	Contents   *inferencepb.InferTensorContents
}

// grpcMessageTensor is what an InferInputTensor and an InferOutputTensor have alike.
type grpcMessageTensor interface {
	GetName() string
	GetDatatype() string
	GetShape() []int64
	GetParameters() map[string]*inferencepb.InferParameter
	GetContents() *inferencepb.InferTensorContents
}

// GRPCTensorsOf are the tensors of a gRPC message (its inputs or its outputs) as GRPCTensors.
func GRPCTensorsOf[T grpcMessageTensor](tensors []T) []GRPCTensor {
	out := make([]GRPCTensor, len(tensors))
	for i, t := range tensors {
		out[i] = GRPCTensor{Name: t.GetName(), Datatype: t.GetDatatype(), Shape: t.GetShape(),
			Parameters: t.GetParameters(), Contents: t.GetContents()}
	}
	return out
}

// FromGRPC makes the tensors of a gRPC message into tensors of a REST body: typed contents
// become JSON data, raw contents (raw, one per tensor, or none) binary tensors whose bytes
// are raw[i] as they are, following each other in order (Offset, Size). It checks what the
// Reader checks of a REST body (the number of tensors, the rank of their shapes, what their
// parameters hold) and each tensor's contents against its datatype and shape. The JSON data it
// makes is charged to the reader's budget: held, to be released by the caller.
func (r Reader) FromGRPC(tensors []GRPCTensor, raw [][]byte) (out []Tensor, held int64, err error) {
	if len(tensors) > r.MaxTensors {
		return nil, 0, &LimitError{Bound: BoundTensors, Limit: r.MaxTensors}
	}
	if len(raw) > 0 && len(raw) != len(tensors) {
		return nil, 0, fmt.Errorf("%d raw contents for %d tensors: there must be one per tensor, or none", len(raw), len(tensors))
	}
	defer func() {
		if err != nil {
			r.Budget.Release(held)
			held = 0
		}
	}()
	out = make([]Tensor, len(tensors))
	var offset int64
	for i := range tensors {
		g, t := &tensors[i], &out[i]
		if len(g.Shape) > r.MaxRank {
			return nil, held, &LimitError{Bound: BoundRank, Limit: r.MaxRank}
		}
		*t = Tensor{Name: g.Name, Shape: g.Shape, Datatype: g.Datatype}
		if t.Parameters, err = jsonParameters(g.Parameters); err != nil {
			return nil, held, fmt.Errorf("tensor %s: %w", g.Name, err)
		}
		n := Elements(g.Shape)
		if n < 0 {
			return nil, held, fmt.Errorf("tensor %s: shape %s is not a size", g.Name, FormatShape(g.Shape))
		}
		if len(raw) > 0 {
			if g.Contents != nil {
				return nil, held, fmt.Errorf("tensor %s: has contents besides the message's raw contents", g.Name)
			}
			if err := checkRaw(t, raw[i], n); err != nil {
				return nil, held, fmt.Errorf("tensor %s: %w", g.Name, err)
			}
			t.Binary, t.Offset, t.Size = true, offset, int64(len(raw[i]))
			offset += t.Size
			continue
		}
		if t.Data, err = jsonData(g, n); err != nil {
			return nil, held, fmt.Errorf("tensor %s: %w", g.Name, err)
		}
		if !r.Budget.TryAcquire(int64(len(t.Data))) {
			return nil, held, ErrBudgetExceeded
		}
		held += int64(len(t.Data))
	}
	return out, held, nil
}

// checkRaw checks that data holds n elements of t's datatype.
func checkRaw(t *Tensor, data []byte, n int64) error {
	if t.Datatype != "BYTES" {
		if el, ok := elements[t.Datatype]; ok && n <= math.MaxInt64/int64(el.size) && int64(len(data)) == n*int64(el.size) {
			return nil
		}
	}
	_, err := eachBinary(t, data, n, func(any) error { return nil })
	return err
}

// ToGRPC makes tensors of a REST body (binary: the bytes after its JSON document) into tensors
// of a gRPC message. When a tensor is binary, or FP16 or BF16 (which have no typed contents),
// every tensor is carried as raw contents, as the protocol asks: a binary tensor's bytes as
// they are, a JSON tensor's elements encoded (little-endian; BYTES as 4-byte lengths and
// bytes). Otherwise every tensor has typed contents. Parameters that are booleans, integers
// or strings are carried; others have no gRPC form and are left.
func ToGRPC(tensors []Tensor, binary []byte) ([]GRPCTensor, [][]byte, error) {
	useRaw := false
	for i := range tensors {
		if t := &tensors[i]; t.Binary || t.Datatype == "FP16" || t.Datatype == "BF16" {
			useRaw = true
		}
	}
	out := make([]GRPCTensor, len(tensors))
	var raw [][]byte
	if useRaw {
		raw = make([][]byte, len(tensors))
	}
	for i := range tensors {
		t := &tensors[i]
		out[i] = GRPCTensor{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape, Parameters: grpcParameters(t.Parameters)}
		n := Elements(t.Shape)
		if n < 0 {
			return nil, nil, fmt.Errorf("tensor %s: shape %s is not a size", t.Name, FormatShape(t.Shape))
		}
		var err error
		switch {
		case t.Binary:
			if raw[i], err = binaryData(t, binary); err != nil {
				return nil, nil, err
			}
			err = checkRaw(t, raw[i], n)
		case useRaw:
			raw[i], err = rawOfJSON(t, n)
		default:
			out[i].Contents, err = contentsOfJSON(t, n)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
	}
	return out, raw, nil
}

// jsonData is the JSON text of g's typed contents, n elements of its datatype.
func jsonData(g *GRPCTensor, n int64) ([]byte, error) {
	c := g.Contents
	if c == nil {
		c = &inferencepb.InferTensorContents{}
	}
	var (
		count int
		write func(dst []byte, i int) ([]byte, error)
	)
	switch g.Datatype {
	case "BOOL":
		count, write = len(c.BoolContents), func(d []byte, i int) ([]byte, error) { return strconv.AppendBool(d, c.BoolContents[i]), nil }
	case "INT8", "INT16", "INT32":
		count, write = len(c.IntContents), func(d []byte, i int) ([]byte, error) {
			v, err := inRange(int64(c.IntContents[i]), g.Datatype)
			return strconv.AppendInt(d, v, 10), err
		}
	case "INT64":
		count, write = len(c.Int64Contents), func(d []byte, i int) ([]byte, error) { return strconv.AppendInt(d, c.Int64Contents[i], 10), nil }
	case "UINT8", "UINT16", "UINT32":
		count, write = len(c.UintContents), func(d []byte, i int) ([]byte, error) {
			v, err := inRange(int64(c.UintContents[i]), g.Datatype)
			return strconv.AppendInt(d, v, 10), err
		}
	case "UINT64":
		count, write = len(c.Uint64Contents), func(d []byte, i int) ([]byte, error) { return strconv.AppendUint(d, c.Uint64Contents[i], 10), nil }
	case "FP32":
		count, write = len(c.Fp32Contents), func(d []byte, i int) ([]byte, error) { return appendFloat(d, float64(c.Fp32Contents[i]), 32) }
	case "FP64":
		count, write = len(c.Fp64Contents), func(d []byte, i int) ([]byte, error) { return appendFloat(d, c.Fp64Contents[i], 64) }
	case "BYTES":
		// The protocol's REST API carries BYTES elements as strings.
		count, write = len(c.BytesContents), func(d []byte, i int) ([]byte, error) { return appendString(d, string(c.BytesContents[i])), nil }
	case "FP16", "BF16":
		return nil, fmt.Errorf("%s has no typed contents: its data is the message's raw contents", g.Datatype)
	default:
		return nil, fmt.Errorf("datatype %q is not one of the protocol's", g.Datatype)
	}
	if int64(count) != n || otherContents(c, g.Datatype) {
		return nil, fmt.Errorf("its contents must be %d elements of %s (shape %s) in the field of that datatype", n, g.Datatype, FormatShape(g.Shape))
	}
	data := append(make([]byte, 0, 2+n*4), '[')
	for i := range count {
		if i > 0 {
			data = append(data, ',')
		}
		var err error
		if data, err = write(data, i); err != nil {
			return nil, err
		}
	}
	return append(data, ']'), nil
}

// otherContents reports whether c has elements in a field other than datatype's.
func otherContents(c *inferencepb.InferTensorContents, datatype string) bool {
	lengths := map[string]int{
		"BOOL": len(c.BoolContents), "INT32": len(c.IntContents), "INT64": len(c.Int64Contents),
		"UINT32": len(c.UintContents), "UINT64": len(c.Uint64Contents), "FP32": len(c.Fp32Contents),
		"FP64": len(c.Fp64Contents), "BYTES": len(c.BytesContents),
	}
	field := map[string]string{"INT8": "INT32", "INT16": "INT32", "UINT8": "UINT32", "UINT16": "UINT32"}[datatype]
	if field == "" {
		field = datatype
	}
	for k, l := range lengths {
		if k != field && l > 0 {
			return true
		}
	}
	return false
}

func appendFloat(dst []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%v has no JSON form: send the tensor as raw contents", f)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits), nil
}

// contentsOfJSON is the typed contents of the n elements of JSON tensor t.
func contentsOfJSON(t *Tensor, n int64) (*inferencepb.InferTensorContents, error) {
	c := &inferencepb.InferTensorContents{}
	add, err := contentsAppender(c, t.Datatype)
	if err != nil {
		return nil, err
	}
	return c, eachJSON(t, n, add)
}

// contentsAppender is what appends one decoded element (as Decode gives it) of datatype to c.
func contentsAppender(c *inferencepb.InferTensorContents, datatype string) (func(any) error, error) {
	switch datatype {
	case "BOOL":
		return func(e any) error { c.BoolContents = append(c.BoolContents, e.(bool)); return nil }, nil
	case "INT8", "INT16", "INT32":
		return func(e any) error {
			v, err := inRange(e.(int64), datatype)
			c.IntContents = append(c.IntContents, int32(v))
			return err
		}, nil
	case "INT64":
		return func(e any) error { c.Int64Contents = append(c.Int64Contents, e.(int64)); return nil }, nil
	case "UINT8", "UINT16", "UINT32":
		return func(e any) error {
			v, err := inRange(e.(int64), datatype)
			c.UintContents = append(c.UintContents, uint32(v))
			return err
		}, nil
	case "UINT64":
		return func(e any) error { c.Uint64Contents = append(c.Uint64Contents, e.(uint64)); return nil }, nil
	case "FP32":
		return func(e any) error { c.Fp32Contents = append(c.Fp32Contents, float32(e.(float64))); return nil }, nil
	case "FP64":
		return func(e any) error { c.Fp64Contents = append(c.Fp64Contents, e.(float64)); return nil }, nil
	case "BYTES":
		return func(e any) error { c.BytesContents = append(c.BytesContents, []byte(e.(string))); return nil }, nil
	}
	return nil, fmt.Errorf("datatype %q is not one of the protocol's typed contents", datatype)
}

// integer ranges of the datatypes whose elements decode to int64.
var intRanges = map[string][2]int64{
	"INT8": {math.MinInt8, math.MaxInt8}, "INT16": {math.MinInt16, math.MaxInt16}, "INT32": {math.MinInt32, math.MaxInt32},
	"UINT8": {0, math.MaxUint8}, "UINT16": {0, math.MaxUint16}, "UINT32": {0, math.MaxUint32},
	"INT64": {math.MinInt64, math.MaxInt64},
}

func inRange(v int64, datatype string) (int64, error) {
	if r := intRanges[datatype]; v < r[0] || v > r[1] {
		return 0, fmt.Errorf("%d is not a %s", v, datatype)
	}
	return v, nil
}

// rawOfJSON is the raw contents of the n elements of JSON tensor t: little-endian, BYTES as a
// 4-byte length and the bytes of each element.
func rawOfJSON(t *Tensor, n int64) ([]byte, error) {
	if t.Datatype == "BYTES" {
		var out []byte
		err := eachJSON(t, n, func(e any) error {
			out = le.AppendUint32(out, uint32(len(e.(string))))
			out = append(out, e.(string)...)
			return nil
		})
		return out, err
	}
	el, ok := elements[t.Datatype]
	if ok && el.append == nil {
		return nil, fmt.Errorf("%s data in JSON has no gRPC form but raw bytes: send the tensor as binary data", t.Datatype)
	}
	out := make([]byte, 0, n*int64(el.size))
	err := eachJSON(t, n, func(e any) error {
		if v, isInt := e.(int64); isInt {
			if _, err := inRange(v, t.Datatype); err != nil {
				return err
			}
		}
		out = el.append(out, e)
		return nil
	})
	return out, err
}

// jsonParameters are gRPC parameters as the JSON values of a REST tensor's or body's.
func jsonParameters(params map[string]*inferencepb.InferParameter) (map[string]json.RawMessage, error) {
	if len(params) == 0 {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(params))
	for k, p := range params {
		if k == binaryDataSize {
			return nil, fmt.Errorf("parameter %q belongs to the REST API's binary data extension", k)
		}
		switch v := p.GetParameterChoice().(type) {
		case *inferencepb.InferParameter_BoolParam:
			out[k] = strconv.AppendBool(nil, v.BoolParam)
		case *inferencepb.InferParameter_Int64Param:
			out[k] = strconv.AppendInt(nil, v.Int64Param, 10)
		case *inferencepb.InferParameter_StringParam:
			out[k] = appendString(nil, v.StringParam)
		default:
			return nil, fmt.Errorf("parameter %q has no value", k)
		}
	}
	return out, nil
}

// grpcParameters are the parameters of a REST tensor or body that have a gRPC form.
func grpcParameters(params map[string]json.RawMessage) map[string]*inferencepb.InferParameter {
	var out map[string]*inferencepb.InferParameter
	for k, raw := range params {
		var p *inferencepb.InferParameter
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			continue
		}
		switch v := v.(type) {
		case bool:
			p = &inferencepb.InferParameter{ParameterChoice: &inferencepb.InferParameter_BoolParam{BoolParam: v}}
		case string:
			p = &inferencepb.InferParameter{ParameterChoice: &inferencepb.InferParameter_StringParam{StringParam: v}}
		case json.Number:
			i, err := v.Int64()
			if err != nil {
				continue
			}
			p = &inferencepb.InferParameter{ParameterChoice: &inferencepb.InferParameter_Int64Param{Int64Param: i}}
		default:
			continue
		}
		if out == nil {
			out = make(map[string]*inferencepb.InferParameter, len(params))
		}
		out[k] = p
	}
	return out
}
