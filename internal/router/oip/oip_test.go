package oip

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestParseAndAppendRoundTrip(t *testing.T) {
	head := `{"model_name":"m","outputs":[` +
		`{"name":"a","shape":[2],"datatype":"INT64","parameters":{"content_type":"np"},"data":[1,2]},` +
		`{"name":"b","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":8}}]}`
	var tail []byte
	for _, f := range []float32{1.5, -2} {
		tail = binary.LittleEndian.AppendUint32(tail, math.Float32bits(f))
	}
	doc, bin, err := Split(append([]byte(head), tail...), int64(len(head)))
	if err != nil || string(doc) != head || string(bin) != string(tail) {
		t.Fatalf("Split = %q, %q, %v", doc, bin, err)
	}
	outputs, err := ParseResponse(doc, int64(len(bin)))
	if err != nil {
		t.Fatal(err)
	}
	if len(outputs) != 2 || outputs[0].Binary || !outputs[1].Binary || outputs[1].Offset != 0 || outputs[1].Size != 8 {
		t.Fatalf("outputs = %+v", outputs)
	}
	if _, ok := outputs[1].Parameters[binaryDataSize]; ok {
		t.Fatal("binary_data_size is kept among the parameters")
	}
	outputs[0].Name, outputs[1].Name = "x", "y"
	req, binary := AppendRequest(nil, outputs, true)
	want := `{"inputs":[{"name":"x","shape":[2],"datatype":"INT64","parameters":{"content_type":"np"},"data":[1,2]},` +
		`{"name":"y","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":8}}],"parameters":{"binary_data_output":true}}`
	if !binary || string(req) != want {
		t.Fatalf("request = %q (binary %v), want %q", req, binary, want)
	}
	inputs, err := ParseRequest(req, 8)
	if err != nil || len(inputs) != 2 || !inputs[1].Binary || inputs[1].Size != 8 || string(inputs[0].Data) != "[1,2]" {
		t.Fatalf("the request reads back as %+v, %v", inputs, err)
	}
	if v, err := Decode(&inputs[1], tail, 10); err != nil || fmt.Sprint(v) != "[1.5 -2]" {
		t.Fatalf("Decode = %v, %v", v, err)
	}
}

func TestAppendRequestJSON(t *testing.T) {
	body, binary := AppendRequest(nil, []Tensor{{Name: `q"uote`, Shape: []int64{1}, Datatype: "BYTES", Data: json.RawMessage(`["é"]`)}}, false)
	if binary {
		t.Fatal("binary for an all-JSON body")
	}
	var v struct{ Inputs []Tensor }
	if err := json.Unmarshal(body, &v); err != nil || v.Inputs[0].Name != `q"uote` {
		t.Fatalf("%s: %v", body, err)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		binary    int64
		want      string
	}{
		{"not JSON", `hello`, 0, "not an Open Inference Protocol body"},
		{"no outputs", `{"inputs":[]}`, 0, "no outputs"},
		{"no data", `{"outputs":[{"name":"a","shape":[1],"datatype":"FP32"}]}`, 0, "outputs[0] (a): no data"},
		{"binary too short", `{"outputs":[{"name":"a","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}]}`, 2,
			"binary_data_size is 4, 2 bytes are left"},
		{"bytes left", `{"outputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}]}`, 2, "2 bytes after the tensors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseResponse([]byte(tc.doc), tc.binary)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, _, err := Split([]byte(`{}`), 5); err == nil || err.Error() != "Inference-Header-Content-Length is 5, the body has 2 bytes" {
		t.Fatalf("Split: %v", err)
	}
}

func TestFits(t *testing.T) {
	for _, tc := range []struct {
		from, to TensorMetadata
		want     string
	}{
		{TensorMetadata{Datatype: "FP32", Shape: []int64{1, 4}}, TensorMetadata{Datatype: "FP32", Shape: []int64{-1, 4}}, ""},
		{TensorMetadata{Datatype: "FP32", Shape: []int64{-1, -1}}, TensorMetadata{Datatype: "FP32", Shape: []int64{2, 4}}, ""},
		{TensorMetadata{Datatype: "FP32", Shape: []int64{1, 3}}, TensorMetadata{Datatype: "FP32", Shape: []int64{-1, 4}}, "shape [1,3], the input is [-1,4]"},
		{TensorMetadata{Datatype: "FP32", Shape: []int64{4}}, TensorMetadata{Datatype: "FP32", Shape: []int64{1, 4}}, "shape [4], the input is [1,4]"},
		{TensorMetadata{Datatype: "FP16", Shape: []int64{4}}, TensorMetadata{Datatype: "FP32", Shape: []int64{4}}, "datatype FP16, the input is FP32"},
	} {
		err := Fits(tc.from, tc.to)
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("Fits(%v, %v) = %v, want %q", tc.from, tc.to, err, tc.want)
		}
	}
}

func TestDecode(t *testing.T) {
	le := binary.LittleEndian
	bin := func(datatype string, shape []int64, data []byte) Tensor {
		return Tensor{Name: "t", Datatype: datatype, Shape: shape, Binary: true, Size: int64(len(data)), Data: data}
	}
	for _, tc := range []struct {
		name string
		t    Tensor
		want string
	}{
		{"JSON nested FP32", Tensor{Datatype: "FP32", Shape: []int64{2, 2}, Data: json.RawMessage(`[[1,2.5],[3,4]]`)}, "[1 2.5 3 4]"},
		{"JSON INT64", Tensor{Datatype: "INT64", Shape: []int64{2}, Data: json.RawMessage(`[9007199254740993,-1]`)}, "[9007199254740993 -1]"},
		{"JSON UINT64", Tensor{Datatype: "UINT64", Shape: []int64{1}, Data: json.RawMessage(`[18446744073709551615]`)}, "[18446744073709551615]"},
		{"JSON BOOL", Tensor{Datatype: "BOOL", Shape: []int64{2}, Data: json.RawMessage(`[true,false]`)}, "[true false]"},
		{"JSON BYTES", Tensor{Datatype: "BYTES", Shape: []int64{1}, Data: json.RawMessage(`["cat"]`)}, "[cat]"},
		{"binary FP32", bin("FP32", []int64{2}, le.AppendUint32(le.AppendUint32(nil, math.Float32bits(0.5)), math.Float32bits(-3))), "[0.5 -3]"},
		{"binary FP16", bin("FP16", []int64{3}, []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x7c}), "[1 -2 +Inf]"},
		{"binary BF16", bin("BF16", []int64{1}, []byte{0xc0, 0x3f}), "[1.5]"},
		{"binary INT8", bin("INT8", []int64{2}, []byte{0xff, 0x7f}), "[-1 127]"},
		{"binary UINT16", bin("UINT16", []int64{1}, []byte{0xff, 0xff}), "[65535]"},
		{"binary INT64", bin("INT64", []int64{1}, le.AppendUint64(nil, math.MaxUint64)), "[-1]"},
		{"binary BOOL", bin("BOOL", []int64{2}, []byte{1, 0}), "[true false]"},
		{"binary BYTES", bin("BYTES", []int64{2}, append(append(le.AppendUint32(nil, 2), "hi"...), le.AppendUint32(nil, 0)...)), "[hi ]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(&tc.t, bytesOf(&tc.t), 100)
			if err != nil || fmt.Sprint(got) != tc.want {
				t.Fatalf("Decode = %v, %v, want %s", got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		t    Tensor
		want string
	}{
		{"too many", Tensor{Datatype: "FP32", Shape: []int64{200}, Data: json.RawMessage(`[]`)}, "200 elements, at most 100"},
		{"fewer than the shape", Tensor{Datatype: "FP32", Shape: []int64{3}, Data: json.RawMessage(`[1,2]`)}, "data has 2 elements, shape [3] has 3"},
		{"more than the shape", Tensor{Datatype: "FP32", Shape: []int64{1}, Data: json.RawMessage(`[1,2]`)}, "more than the 1 elements"},
		{"wrong element", Tensor{Datatype: "INT32", Shape: []int64{1}, Data: json.RawMessage(`[1.5]`)}, "1.5 is not a INT32 element"},
		{"binary size", bin("FP32", []int64{2}, []byte{1, 2, 3}), "3 bytes, shape [2] of FP32 has 8"},
		{"unknown datatype", bin("FP8", []int64{1}, []byte{1}), `datatype "FP8"`},
		{"negative shape", Tensor{Datatype: "FP32", Shape: []int64{-1}, Data: json.RawMessage(`[1]`)}, "shape [-1] is not a size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(&tc.t, bytesOf(&tc.t), 100)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseModelMetadata(t *testing.T) {
	m, err := ParseModelMetadata([]byte(`{"name":"m","versions":["1"],"platform":"p","inputs":[{"name":"x","datatype":"FP32","shape":[-1,3]}],"outputs":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if in, ok := m.Input("x"); !ok || FormatShape(in.Shape) != "[-1,3]" {
		t.Fatalf("input x = %v, %v", in, ok)
	}
	if _, ok := m.Output("x"); ok {
		t.Fatal("x is an output")
	}
	if _, err := ParseModelMetadata([]byte(`{"error":"loading"}`)); err == nil {
		t.Fatal("an error answer is read as metadata")
	}
}

// bytesOf is the binary data of a test tensor, which keeps it in Data, and clears Data.
func bytesOf(t *Tensor) []byte {
	if !t.Binary {
		return nil
	}
	b := []byte(t.Data)
	t.Data = nil
	return b
}
