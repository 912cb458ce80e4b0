package oip

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// roundTrip makes tensors (raw: the message's raw contents) a REST request and back, as the
// router does between a gRPC caller and a gRPC step.
func roundTrip(t testing.TB, r Reader, tensors []GRPCTensor, raw [][]byte) ([]GRPCTensor, [][]byte, error) {
	t.Helper()
	rest, held, err := r.FromGRPC(tensors, raw)
	if err != nil {
		return nil, nil, err
	}
	defer r.Budget.Release(held)
	var doc bytes.Buffer
	if _, err := WriteRequest(&doc, rest, nil, false); err != nil {
		t.Fatal(err)
	}
	docLength := doc.Len()
	for _, b := range raw {
		doc.Write(b)
	}
	body := doc.Bytes()
	read, held2, err := r.Request(body[:docLength], int64(len(body)-docLength))
	if err != nil {
		t.Fatalf("the REST request made of gRPC tensors is not read back: %v\n%s", err, body[:docLength])
	}
	defer r.Budget.Release(held2)
	return mustToGRPC(t, read, body[docLength:])
}

func mustToGRPC(t testing.TB, tensors []Tensor, binary []byte) ([]GRPCTensor, [][]byte, error) {
	t.Helper()
	out, raw, err := ToGRPC(tensors, binary)
	if err != nil {
		t.Fatalf("ToGRPC of the REST request made of gRPC tensors: %v", err)
	}
	return out, raw, nil
}

func grpcReader() Reader { return Reader{MaxTensors: 64, MaxRank: 8, Budget: newBudget(1 << 30)} }

func TestGRPCTypedContentsRoundTrip(t *testing.T) {
	c := func(f func(*inferencepb.InferTensorContents)) *inferencepb.InferTensorContents {
		out := &inferencepb.InferTensorContents{}
		f(out)
		return out
	}
	tensors := []GRPCTensor{
		{Name: "b", Datatype: "BOOL", Shape: []int64{2}, Contents: c(func(x *inferencepb.InferTensorContents) { x.BoolContents = []bool{true, false} })},
		{Name: "i8", Datatype: "INT8", Shape: []int64{2}, Contents: c(func(x *inferencepb.InferTensorContents) { x.IntContents = []int32{-128, 127} })},
		{Name: "i32", Datatype: "INT32", Shape: []int64{1, 2}, Contents: c(func(x *inferencepb.InferTensorContents) { x.IntContents = []int32{math.MinInt32, 7} })},
		{Name: "i64", Datatype: "INT64", Shape: []int64{1}, Contents: c(func(x *inferencepb.InferTensorContents) { x.Int64Contents = []int64{math.MaxInt64} })},
		{Name: "u16", Datatype: "UINT16", Shape: []int64{1}, Contents: c(func(x *inferencepb.InferTensorContents) { x.UintContents = []uint32{65535} })},
		{Name: "u64", Datatype: "UINT64", Shape: []int64{1}, Contents: c(func(x *inferencepb.InferTensorContents) { x.Uint64Contents = []uint64{math.MaxUint64} })},
		{Name: "f32", Datatype: "FP32", Shape: []int64{3}, Contents: c(func(x *inferencepb.InferTensorContents) {
			x.Fp32Contents = []float32{0.1, -3.4e38, float32(math.SmallestNonzeroFloat32)}
		})},
		{Name: "f64", Datatype: "FP64", Shape: []int64{2}, Contents: c(func(x *inferencepb.InferTensorContents) { x.Fp64Contents = []float64{math.Pi, math.Copysign(0, -1)} })},
		{Name: "s", Datatype: "BYTES", Shape: []int64{2}, Contents: c(func(x *inferencepb.InferTensorContents) {
			x.BytesContents = [][]byte{[]byte(`say "hi"`), {}}
		}),
			Parameters: map[string]*inferencepb.InferParameter{"content_type": {ParameterChoice: &inferencepb.InferParameter_StringParam{StringParam: "str"}}}},
	}
	got, raw, err := roundTrip(t, grpcReader(), tensors, nil)
	if err != nil {
		t.Fatal(err)
	}
	if raw != nil {
		t.Fatalf("typed contents came back as raw contents")
	}
	for i := range tensors {
		w, g := tensors[i], got[i]
		if g.Name != w.Name || g.Datatype != w.Datatype || !proto.Equal(g.Contents, w.Contents) || len(g.Parameters) != len(w.Parameters) {
			t.Errorf("tensor %s came back as %+v, want %+v", w.Name, g, w)
		}
	}
}

func TestGRPCRawContentsRoundTrip(t *testing.T) {
	fp16 := []byte{0x00, 0x3c, 0x00, 0xc0} // 1, -2
	strs := binary.LittleEndian.AppendUint32(nil, 2)
	strs = append(strs, "ok"...)
	tensors := []GRPCTensor{
		{Name: "h", Datatype: "FP16", Shape: []int64{2}},
		{Name: "s", Datatype: "BYTES", Shape: []int64{1}},
	}
	got, raw, err := roundTrip(t, grpcReader(), tensors, [][]byte{fp16, strs})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(raw) != 2 || !bytes.Equal(raw[0], fp16) || !bytes.Equal(raw[1], strs) || got[0].Contents != nil {
		t.Fatalf("raw contents came back as %v %x", got, raw)
	}
}

// A JSON tensor going to a message with raw contents is encoded as the protocol's raw form.
func TestToGRPCEncodesJSONAsRawBesideABinaryTensor(t *testing.T) {
	tensors := []Tensor{
		{Name: "bin", Datatype: "UINT8", Shape: []int64{2}, Binary: true, Size: 2},
		{Name: "i16", Datatype: "INT16", Shape: []int64{2}, Data: []byte(`[[-2, 3]]`)},
		{Name: "s", Datatype: "BYTES", Shape: []int64{1}, Data: []byte(`["ab"]`)},
	}
	_, raw, err := ToGRPC(tensors, []byte{7, 9})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{{7, 9}, {0xfe, 0xff, 3, 0}, {2, 0, 0, 0, 'a', 'b'}}
	for i := range want {
		if !bytes.Equal(raw[i], want[i]) {
			t.Fatalf("raw[%d] = %x, want %x", i, raw[i], want[i])
		}
	}
}

func TestFromGRPCRefuses(t *testing.T) {
	f32 := func(v ...float32) *inferencepb.InferTensorContents {
		return &inferencepb.InferTensorContents{Fp32Contents: v}
	}
	for name, tc := range map[string]struct {
		tensors []GRPCTensor
		raw     [][]byte
		want    string
	}{
		"short contents": {[]GRPCTensor{{Name: "x", Datatype: "FP32", Shape: []int64{3}, Contents: f32(1)}}, nil,
			"tensor x: its contents must be 3 elements of FP32 (shape [3]) in the field of that datatype"},
		"another type's field": {[]GRPCTensor{{Name: "x", Datatype: "INT64", Shape: []int64{1}, Contents: f32(1)}}, nil,
			"tensor x: its contents must be 1 elements of INT64 (shape [1]) in the field of that datatype"},
		"NaN in JSON": {[]GRPCTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: f32(float32(math.NaN()))}}, nil,
			"tensor x: NaN has no JSON form: send the tensor as raw contents"},
		"typed FP16": {[]GRPCTensor{{Name: "x", Datatype: "FP16", Shape: []int64{1}}}, nil,
			"tensor x: FP16 has no typed contents: its data is the message's raw contents"},
		"unknown datatype": {[]GRPCTensor{{Name: "x", Datatype: "FP8", Shape: []int64{1}}}, nil,
			`tensor x: datatype "FP8" is not one of the protocol's`},
		"an INT8 out of range": {[]GRPCTensor{{Name: "x", Datatype: "INT8", Shape: []int64{1},
			Contents: &inferencepb.InferTensorContents{IntContents: []int32{200}}}}, nil, "tensor x: 200 is not a INT8"},
		"a UINT16 out of range": {[]GRPCTensor{{Name: "x", Datatype: "UINT16", Shape: []int64{1},
			Contents: &inferencepb.InferTensorContents{UintContents: []uint32{70000}}}}, nil, "tensor x: 70000 is not a UINT16"},
		"negative shape": {[]GRPCTensor{{Name: "x", Datatype: "FP32", Shape: []int64{-1}}}, nil,
			"tensor x: shape [-1] is not a size"},
		"raw of the wrong size": {[]GRPCTensor{{Name: "x", Datatype: "FP32", Shape: []int64{2}}}, [][]byte{{1, 2, 3}},
			"tensor x: 3 bytes, shape [2] of FP32 has 8"},
		"a shape whose bytes overflow": {[]GRPCTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1 << 62}}}, [][]byte{{}},
			"tensor x: 0 bytes, shape [4611686018427387904] of FP32 has more than any body"},
		"raw beside contents": {[]GRPCTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1}, Contents: f32(1)}}, [][]byte{{0, 0, 0, 0}},
			"tensor x: has contents besides the message's raw contents"},
		"raw for some tensors": {[]GRPCTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1}}, {Name: "y", Datatype: "FP32", Shape: []int64{1}}},
			[][]byte{{0, 0, 0, 0}}, "1 raw contents for 2 tensors: there must be one per tensor, or none"},
		"a BYTES element past the end": {[]GRPCTensor{{Name: "s", Datatype: "BYTES", Shape: []int64{1}}}, [][]byte{{9, 0, 0, 0, 'a'}},
			"tensor s: an element of 9 bytes, 1 are left"},
		"too many dimensions": {[]GRPCTensor{{Name: "x", Datatype: "FP32", Shape: make([]int64, 9)}}, nil,
			"has a tensor whose shape has more than 8 dimensions"},
	} {
		t.Run(name, func(t *testing.T) {
			r := grpcReader()
			_, held, err := r.FromGRPC(tc.tensors, tc.raw)
			if err == nil || (err.Error() != tc.want && !strings.Contains(tc.want, "dimensions")) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if held != 0 || r.Budget.(*budget).used.Load() != 0 {
				t.Fatalf("a refusal holds %d bytes of the budget", r.Budget.(*budget).used.Load())
			}
		})
	}
}

// FuzzGRPCRequest decodes any bytes as a ModelInferRequest, as the router does: what
// UnmarshalGRPCRequest admits is what protobuf decodes, within the bounds, and what it refuses
// over a bound is over it; what FromGRPC admits comes back the same through a REST request (the
// router's way between a gRPC caller and a gRPC step); a refusal holds nothing.
func FuzzGRPCRequest(f *testing.F) {
	seeds := []*inferencepb.ModelInferRequest{
		{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{2},
			Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{1, 2}}}}},
		{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "s", Datatype: "BYTES", Shape: []int64{1}}},
			RawInputContents: [][]byte{{1, 0, 0, 0, 'a'}}},
		{Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "i", Datatype: "INT8", Shape: []int64{1, 1},
			Contents:   &inferencepb.InferTensorContents{IntContents: []int32{-3}},
			Parameters: map[string]*inferencepb.InferParameter{"p": {ParameterChoice: &inferencepb.InferParameter_Int64Param{Int64Param: 3}}}}}},
	}
	for _, s := range seeds {
		b, _ := proto.Marshal(s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := grpcReader()
		bg := r.Budget.(*budget)
		var plain inferencepb.ModelInferRequest
		plainErr := proto.Unmarshal(data, &plain)
		req, decoded, err := r.UnmarshalGRPCRequest(data)
		if err != nil {
			if bg.used.Load() != 0 {
				t.Fatalf("a refused message holds %d bytes", bg.used.Load())
			}
			var bound *LimitError
			if errors.As(err, &bound) && plainErr == nil && !exceeds(&plain, bound.Bound, r) {
				t.Fatalf("refused %v, but the message is within the bound", err)
			}
			return
		}
		if plainErr != nil || !sameMessage(req, &plain) {
			t.Fatalf("decoded %v, protobuf decodes %v (%v)", req, &plain, plainErr)
		}
		if exceeds(req, BoundTensors, r) || exceeds(req, BoundRank, r) {
			t.Fatalf("admitted a message over the bounds: %v", req)
		}
		r.Budget.Release(decoded)
		tensors := GRPCTensorsOf(req.GetInputs())
		_, held, err := r.FromGRPC(tensors, req.GetRawInputContents())
		if err != nil {
			if held != 0 || bg.used.Load() != 0 {
				t.Fatalf("a refusal holds %d bytes", bg.used.Load())
			}
			return
		}
		r.Budget.Release(held)
		got, raw, err := roundTrip(t, r, tensors, req.GetRawInputContents())
		if err != nil {
			t.Fatal(err)
		}
		if bg.used.Load() != 0 {
			t.Fatalf("the round trip left %d bytes held", bg.used.Load())
		}
		for i := range tensors {
			w, g := &tensors[i], &got[i]
			if g.Name != w.Name || g.Datatype != w.Datatype || len(g.Shape) != len(w.Shape) {
				t.Fatalf("tensor %d came back as %+v, want %+v", i, g, w)
			}
			if len(req.GetRawInputContents()) > 0 {
				if !bytes.Equal(raw[i], req.GetRawInputContents()[i]) {
					t.Fatalf("raw contents of tensor %d came back as %x, want %x", i, raw[i], req.GetRawInputContents()[i])
				}
				continue
			}
			if !sameContents(g.Contents, w.Contents) {
				t.Fatalf("contents of tensor %d came back as %v, want %v", i, g.Contents, w.Contents)
			}
		}
	})
}

// exceeds reports whether m is over the Reader's bound b, for the bounds a decoded message
// tells exactly (parameters given twice are one when decoded).
func exceeds(m *inferencepb.ModelInferRequest, b Bound, r Reader) bool {
	switch b {
	case BoundTensors:
		return max(len(m.GetInputs()), len(m.GetOutputs()), len(m.GetRawInputContents())) > r.MaxTensors
	case BoundRank:
		for _, t := range m.GetInputs() {
			if len(t.GetShape()) > r.MaxRank {
				return true
			}
		}
		return false
	}
	return true
}

// sameMessage compares messages by their deterministic encoding (NaNs included).
func sameMessage(a, b proto.Message) bool {
	o := proto.MarshalOptions{Deterministic: true}
	x, errX := o.Marshal(a)
	y, errY := o.Marshal(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// sameContents compares contents as values: an empty list is no list.
func sameContents(a, b *inferencepb.InferTensorContents) bool {
	if a == nil {
		a = &inferencepb.InferTensorContents{}
	}
	if b == nil {
		b = &inferencepb.InferTensorContents{}
	}
	return proto.Equal(a, b)
}
