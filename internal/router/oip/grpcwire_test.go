package oip

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// field appends field num of wire type BytesType holding v to b.
func field(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// repeatField is field num holding v, n times.
func repeatField(n int, num protowire.Number, v []byte) []byte {
	var b []byte
	for range n {
		b = field(b, num, v)
	}
	return b
}

// unpacked is field num given n times as one varint, 1.
func unpacked(num protowire.Number, n int) []byte {
	var b []byte
	for range n {
		b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), 1)
	}
	return b
}

// requestOf is a ModelInferRequest of one input tensor encoded as tensor.
func requestOf(tensor []byte) []byte { return field(nil, 5, tensor) }

// A message within the bounds decodes as protobuf decodes it, charging its cost until released.
func TestUnmarshalGRPCRequestDecodesWithinBounds(t *testing.T) {
	want := &inferencepb.ModelInferRequest{ModelName: "m", Id: "1",
		Parameters: map[string]*inferencepb.InferParameter{"p": {ParameterChoice: &inferencepb.InferParameter_BoolParam{BoolParam: true}}},
		Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
			{Name: "x", Datatype: "FP32", Shape: []int64{1, 2}, Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{1, 2}},
				Parameters: map[string]*inferencepb.InferParameter{"q": {ParameterChoice: &inferencepb.InferParameter_StringParam{StringParam: "s"}}}},
			{Name: "y", Datatype: "INT64", Shape: []int64{3}, Contents: &inferencepb.InferTensorContents{Int64Contents: []int64{1, 2, 3}}},
		},
		Outputs: []*inferencepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "z"}},
	}
	wire, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	r := grpcReader()
	bg := r.Budget.(*budget)
	got, held, err := r.UnmarshalGRPCRequest(wire)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("decoded %v, want %v", got, want)
	}
	if held < int64(len(wire)) || bg.used.Load() != held {
		t.Fatalf("held %d of a %d-byte message, the budget counts %d", held, len(wire), bg.used.Load())
	}
	r.Budget.Release(held)

	answer := &inferencepb.ModelInferResponse{ModelName: "m", Outputs: []*inferencepb.ModelInferResponse_InferOutputTensor{
		{Name: "z", Datatype: "BYTES", Shape: []int64{1}}}, RawOutputContents: [][]byte{{1, 0, 0, 0, 'a'}}}
	if wire, err = proto.Marshal(answer); err != nil {
		t.Fatal(err)
	}
	res, held, err := r.UnmarshalGRPCResponse(wire)
	if err != nil || !proto.Equal(res, answer) {
		t.Fatalf("answer decoded %v, %v; want %v", res, err, answer)
	}
	r.Budget.Release(held)
	if bg.used.Load() != 0 {
		t.Fatalf("%d bytes left held", bg.used.Load())
	}
}

// A message over a bound, or in a form whose decoding costs more than its size says, is refused
// from its encoding, holding nothing, with what is wrong.
func TestUnmarshalGRPCRequestRefusals(t *testing.T) {
	tensor := field(field(nil, 1, []byte("x")), 2, []byte("FP32"))
	packedShape := func(dims int) []byte {
		var shape []byte
		for range dims {
			shape = protowire.AppendVarint(shape, 1)
		}
		return field(nil, 3, shape)
	}
	parameter := field(field(nil, 1, []byte("k")), 2, protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 1))
	oneInt64 := field(nil, 3, []byte{1})
	for _, c := range []struct {
		name string
		wire []byte
		want string
	}{
		{"inputs", repeatField(65, 5, tensor), "inputs has more than 64 tensors"},
		{"requested outputs", repeatField(65, 6, field(nil, 1, []byte("z"))), "outputs has more than 64 tensors"},
		{"raw contents", repeatField(65, 7, []byte{1}), "raw_input_contents has more than 64 tensors"},
		{"rank, packed", requestOf(append(tensor, packedShape(9)...)), "inputs[0]: a shape of more than 8 dimensions"},
		{"rank, one by one", requestOf(append(tensor, unpacked(3, 9)...)), "inputs[0]: a shape of more than 8 dimensions"},
		{"rank over parts", requestOf(append(append(tensor, packedShape(5)...), packedShape(4)...)), "inputs[0]: a shape of more than 8 dimensions"},
		{"tensor parameters", requestOf(append(tensor, repeatField(65, 4, parameter)...)), "inputs[0]: more than 64 parameters"},
		{"message parameters", repeatField(65, 4, parameter), "more than 64 parameters"},
		{"requested output parameters", field(nil, 6, repeatField(65, 2, parameter)), "outputs[0]: more than 64 parameters"},
		// Protobuf copies a packed list for each part: n parts cost n² / 2 copies.
		{"contents in parts", requestOf(append(tensor, field(nil, 5, repeatField(17, 3, []byte{1}))...)),
			"not a ModelInferRequest: inputs[0]: contents: int64_contents: packed in more than 16 parts"},
		{"contents in parts over several contents", requestOf(append(append(tensor,
			field(nil, 5, repeatField(9, 3, []byte{1}))...), field(nil, 5, repeatField(8, 3, []byte{1}))...)),
			"not a ModelInferRequest: inputs[0]: contents: int64_contents: packed in more than 16 parts"},
		{"shape in parts", requestOf(append(tensor, repeatField(17, 3, nil)...)),
			"not a ModelInferRequest: inputs[0]: shape: packed in more than 16 parts"},
		{"fixed list not of its width", requestOf(append(tensor, field(nil, 5, field(nil, 6, []byte{1, 2, 3}))...)),
			"not a ModelInferRequest: inputs[0]: contents: fp32_contents: a packed list of 3 bytes is not of 4-byte elements"},
		{"varint cut", requestOf(append(tensor, field(nil, 5, field(nil, 3, []byte{0x80}))...)),
			"not a ModelInferRequest: inputs[0]: contents: int64_contents: a packed list ends inside a varint"},
		{"truncated", requestOf(tensor)[:4], "not a ModelInferRequest: unexpected EOF"},
		{"one part", requestOf(append(tensor, field(nil, 5, oneInt64)...)), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := grpcReader()
			bg := r.Budget.(*budget)
			m, held, err := r.UnmarshalGRPCRequest(c.wire)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				r.Budget.Release(held)
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if m != nil || held != 0 || bg.peak.Load() != 0 {
				t.Fatalf("a refusal decoded %v, held %d (peak %d)", m, held, bg.peak.Load())
			}
			var bound *LimitError
			if errors.As(err, &bound) != !strings.HasPrefix(c.want, "not a") {
				t.Fatalf("%v: a LimitError is a bound's refusal, and only that", err)
			}
		})
	}
}

// A message whose decoded form the budget cannot hold is refused before it is decoded.
func TestUnmarshalGRPCRequestChargesBeforeDecoding(t *testing.T) {
	var elements []byte
	for range 1000 {
		elements = protowire.AppendVarint(elements, 1)
	}
	wire := requestOf(field(nil, 5, field(nil, 3, elements)))
	r := Reader{Budget: newBudget(int64(len(wire)) * 4)}
	if _, _, err := r.UnmarshalGRPCRequest(wire); !errors.Is(err, ErrBudgetExceeded) {
		t.Fatalf("1000 one-byte INT64 elements (8000 bytes decoded) against a budget of %d: %v", len(wire)*4, err)
	}
}

// What a message is charged is at least what protobuf allocates decoding it, for the forms that
// cost most: many tensors, small varints widened to 8 bytes, lists appended one element at a
// time, many empty bytes, parameters.
func TestUnmarshalGRPCCostBoundsAllocation(t *testing.T) {
	var oneByteVarints, fixed []byte
	for range 50_000 {
		oneByteVarints = protowire.AppendVarint(oneByteVarints, 1)
	}
	for range 10_000 {
		fixed = protowire.AppendFixed64(fixed, 1)
	}
	parameter := field(field(nil, 1, []byte("k")), 2, field(nil, 3, []byte("v")))
	tensor := field(field(field(nil, 1, []byte("x")), 2, []byte("INT64")), 3, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	var manyParameters []byte
	for i := range 64 {
		manyParameters = field(manyParameters, 4, field(field(nil, 1, fmt.Appendf(nil, "k%d", i)), 2, field(nil, 3, []byte("v"))))
	}
	for _, c := range []struct {
		name string
		wire []byte
	}{
		{"many tensors", repeatField(64, 5, append(tensor, repeatField(8, 4, parameter)...))},
		{"one-byte int64 packed", requestOf(append(tensor, field(nil, 5, field(nil, 3, oneByteVarints))...))},
		{"one-byte uint32 packed", requestOf(append(tensor, field(nil, 5, field(nil, 4, oneByteVarints))...))},
		{"int64 in 16 parts", requestOf(append(tensor, field(nil, 5, repeatField(16, 3, oneByteVarints[:3000]))...))},
		{"int64 one by one", requestOf(append(tensor, field(nil, 5, unpacked(3, 30_000))...))},
		{"bool one by one", requestOf(append(tensor, field(nil, 5, unpacked(1, 30_000))...))},
		{"fp64 packed", requestOf(append(tensor, field(nil, 5, field(nil, 7, fixed))...))},
		{"empty bytes", requestOf(append(tensor, field(nil, 5, repeatField(30_000, 8, nil))...))},
		{"empty raw contents", repeatField(64, 7, nil)},
		{"parameters", append(manyParameters, requestOf(append(tensor, manyParameters...))...)},
		{"unknown fields", repeatField(20_000, 99, []byte{1})},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := Reader{MaxTensors: 64}
			_, held, err := Reader{MaxTensors: 64, Budget: newBudget(1 << 30)}.UnmarshalGRPCRequest(c.wire)
			if err != nil {
				t.Fatal(err)
			}
			// The least of a few decodings: the runtime allocates now and then besides.
			allocated := int64(math.MaxInt64)
			for range 5 {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				m, _, _ := r.UnmarshalGRPCRequest(c.wire)
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(m)
				allocated = min(allocated, int64(after.TotalAlloc-before.TotalAlloc))
			}
			if allocated > held {
				t.Fatalf("decoding %d bytes allocated %d bytes, charged %d", len(c.wire), allocated, held)
			}
		})
	}
}

// Model metadata decodes as protobuf decodes it, unless a shape comes in more parts than an
// encoder writes.
func TestUnmarshalGRPCMetadata(t *testing.T) {
	want := &inferencepb.ModelMetadataResponse{Name: "m", Platform: "p",
		Inputs:  []*inferencepb.ModelMetadataResponse_TensorMetadata{{Name: "x", Datatype: "FP32", Shape: []int64{-1, 4}}},
		Outputs: []*inferencepb.ModelMetadataResponse_TensorMetadata{{Name: "y", Datatype: "FP32", Shape: []int64{-1}}}}
	wire, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := UnmarshalGRPCMetadata(wire); err != nil || !proto.Equal(got, want) {
		t.Fatalf("decoded %v, %v; want %v", got, err, want)
	}
	parts := field(nil, 5, repeatField(17, 3, []byte{1}))
	if _, err := UnmarshalGRPCMetadata(parts); err == nil || err.Error() != "not a ModelMetadataResponse: shape: packed in more than 16 parts" {
		t.Fatalf("an output's shape in 17 parts: %v", err)
	}
	if _, err := UnmarshalGRPCMetadata(wire[:len(wire)-1]); err == nil || !strings.HasPrefix(err.Error(), "not a ModelMetadataResponse: ") {
		t.Fatalf("cut: %v", err)
	}
}
