package router

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// rawCodec sends and receives gRPC messages as the bytes they are: a forged message goes as it
// is written.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// forgedInput is a ModelInferRequest for model, of one INT64 input x of shape [n] whose
// contents come in parts packed parts of n/parts elements: what an encoder never writes, and
// protobuf decodes in time growing with the square of parts.
func forgedInput(model string, n, parts int) []byte {
	var contents, part []byte
	for range n / parts {
		part = protowire.AppendVarint(part, 1)
	}
	for range parts {
		contents = protowire.AppendTag(contents, 3, protowire.BytesType)
		contents = protowire.AppendBytes(contents, part)
	}
	tensor := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "x")
	tensor = protowire.AppendString(protowire.AppendTag(tensor, 2, protowire.BytesType), "INT64")
	tensor = protowire.AppendBytes(protowire.AppendTag(tensor, 3, protowire.BytesType), protowire.AppendVarint(nil, uint64(n)))
	tensor = protowire.AppendBytes(protowire.AppendTag(tensor, 5, protowire.BytesType), contents)
	msg := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), model)
	return protowire.AppendBytes(protowire.AppendTag(msg, 5, protowire.BytesType), tensor)
}

// A gRPC caller's message is checked against the router's bounds before it is decoded: a forged
// one is refused INVALID_ARGUMENT saying what is wrong, one over maxTensors as a REST request
// is, and one the buffer budget cannot hold decoded UNAVAILABLE, each at once; a message in
// bounds still goes through.
func TestGRPCCallerMessageCheckedBeforeDecoding(t *testing.T) {
	echo := grpcEcho(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveRouterWith(t, config.Config{Pipeline: "ns/p", MaxTensors: 2, MaxBodyBytes: 2 << 20, MaxBufferedBytes: 4 << 20, Steps: []config.Step{
		{Name: "echo", URL: echo.url(), Protocol: config.ProtocolOpenInferenceGRPC, Model: "echo"},
	}}, func(s *Server) { s.GRPC = ln })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	call := func(msg []byte) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var res []byte
		return conn.Invoke(ctx, inferencepb.GRPCInferenceService_ModelInfer_FullMethodName, msg, &res, grpc.ForceCodecV2(rawCodec{}))
	}

	// 20,000 parts of 1 element: 60 KB that would take protobuf seconds of copying.
	start := time.Now()
	err = call(forgedInput("p", 20_000, 20_000))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() !=
		"the request is not one the pipeline can carry: not a ModelInferRequest: inputs[0]: contents: int64_contents: packed in more than 16 parts" {
		t.Fatalf("contents in 20,000 parts: %v", err)
	}
	t.Logf("refused in %v", time.Since(start))

	three := &inferencepb.ModelInferRequest{ModelName: "p"}
	for _, name := range []string{"a", "b", "c"} {
		three.Inputs = append(three.Inputs, &inferencepb.ModelInferRequest_InferInputTensor{Name: name, Datatype: "INT64", Shape: []int64{1},
			Contents: &inferencepb.InferTensorContents{Int64Contents: []int64{1}}})
	}
	if st := status.Convert(call(marshal(t, three))); st.Code() != codes.InvalidArgument || st.Message() != "the request has more than 2 tensors (maxTensors)" {
		t.Fatalf("three inputs: %v", st)
	}

	// 1,000,000 one-byte INT64 elements: 1 MB sent, 8 MB decoded, over maxBufferedBytes (4 MiB).
	if st := status.Convert(call(forgedInput("p", 1_000_000, 1))); st.Code() != codes.Unavailable ||
		!strings.Contains(st.Message(), "maxBufferedBytes") {
		t.Fatalf("a message whose decoded form the budget cannot hold: %v", st)
	}

	ok := &inferencepb.ModelInferRequest{ModelName: "p", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{fp32Input("x", 1, 2, 3, 4)}}
	if err := call(marshal(t, ok)); err != nil {
		t.Fatalf("a message in bounds: %v", err)
	}
}

// A gRPC step's answer is checked as a caller's message is: one over maxTensors, or forged, fails
// the request naming the step, as an answer that is not valid does. Its model metadata is
// checked too.
func TestGRPCStepAnswerCheckedBeforeDecoding(t *testing.T) {
	// What the step answers ModelInfer and ModelMetadata with, whatever it is asked.
	var answer, metadata atomic.Pointer[[]byte]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	md, err := proto.Marshal(&inferencepb.ModelMetadataResponse{Name: "forge",
		Inputs:  []*inferencepb.ModelMetadataResponse_TensorMetadata{{Name: "x", Datatype: "INT64", Shape: []int64{-1}}},
		Outputs: []*inferencepb.ModelMetadataResponse_TensorMetadata{{Name: "y", Datatype: "INT64", Shape: []int64{-1}}}})
	if err != nil {
		t.Fatal(err)
	}
	metadata.Store(&md)
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		var req []byte
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		if m, _ := grpc.MethodFromServerStream(stream); m == inferencepb.GRPCInferenceService_ModelMetadata_FullMethodName {
			return stream.SendMsg(*metadata.Load())
		}
		return stream.SendMsg(*answer.Load())
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	tr := newTestRouter(t, config.Config{MaxTensors: 2, Steps: []config.Step{
		{Name: "forge", URL: "grpc://" + ln.Addr().String(), Protocol: config.ProtocolOpenInferenceGRPC, Model: "forge"},
	}})
	request := `{"inputs":[{"name":"x","shape":[1],"datatype":"INT64","data":[1]}]}`

	output := func(name string) *inferencepb.ModelInferResponse_InferOutputTensor {
		return &inferencepb.ModelInferResponse_InferOutputTensor{Name: name, Datatype: "INT64", Shape: []int64{1},
			Contents: &inferencepb.InferTensorContents{Int64Contents: []int64{1}}}
	}
	answerWith := func(b []byte) { answer.Store(&b) }
	answerWith(marshal(t, &inferencepb.ModelInferResponse{ModelName: "forge", Outputs: []*inferencepb.ModelInferResponse_InferOutputTensor{output("y")}}))
	if a := post(t, tr.url, "application/json", request, nil); a.status != http.StatusOK {
		t.Fatalf("an answer in bounds: %d %s", a.status, a.body)
	}

	answerWith(marshal(t, &inferencepb.ModelInferResponse{ModelName: "forge",
		Outputs: []*inferencepb.ModelInferResponse_InferOutputTensor{output("y"), output("z"), output("w")}}))
	a := post(t, tr.url, "application/json", request, nil)
	if e := a.errorBody(t); a.status != http.StatusBadGateway || e.Reason != ReasonServerError ||
		e.Error != "step 1 (forge) answered a ModelInfer response that has more than 2 tensors (maxTensors)" {
		t.Fatalf("three outputs: %d %s", a.status, a.body)
	}

	answerWith(forgedInput("forge", 20_000, 20_000)) // an output is encoded as an input is
	a = post(t, tr.url, "application/json", request, nil)
	if e := a.errorBody(t); a.status != http.StatusBadGateway || e.Error != "step 1 (forge) answered a ModelInfer response that is not a valid one" {
		t.Fatalf("outputs in 20,000 parts: %d %s", a.status, a.body)
	}

	// Model metadata whose input's shape comes in 20,000 parts.
	var shape []byte
	for range 20_000 {
		shape = protowire.AppendBytes(protowire.AppendTag(shape, 3, protowire.BytesType), []byte{1})
	}
	md = protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), shape)
	metadata.Store(&md)
	if _, err := tr.steps[0].readModel(context.Background(), nil); err == nil ||
		err.Error() != "ModelMetadata: not a ModelMetadataResponse: shape: packed in more than 16 parts" {
		t.Fatalf("metadata with a shape in 20,000 parts: %v", err)
	}
}
