package main

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// serveGRPCModel is a client of the gRPC service of a server with the shipped model name, loaded
// when loaded is true.
func serveGRPCModel(t *testing.T, name string, loaded bool) inferencepb.GRPCInferenceServiceClient {
	t.Helper()
	s := &server{name: name}
	if loaded {
		m, err := loadModel("models/" + name)
		if err != nil {
			t.Fatal(err)
		}
		s.model.Store(m)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newGRPCServer(s)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return inferencepb.NewGRPCInferenceServiceClient(conn)
}

// Over gRPC the shipped models classify the same flowers: the scaler read from raw contents,
// the classifier from typed contents, its labels answered as bytes_contents.
func TestGRPCClassifiesIrises(t *testing.T) {
	ctx := context.Background()
	scaler, classifier := serveGRPCModel(t, "iris-scaler", true), serveGRPCModel(t, "iris-classifier", true)
	var raw []byte
	for _, v := range []float32{5.1, 3.5, 1.4, 0.2, 6.0, 2.7, 4.5, 1.5, 6.9, 3.1, 5.8, 2.2} {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
	}
	scaled, err := scaler.ModelInfer(ctx, &inferencepb.ModelInferRequest{ModelName: "iris-scaler",
		Inputs:           []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "features", Datatype: "FP32", Shape: []int64{3, 4}}},
		RawInputContents: [][]byte{raw}})
	if err != nil {
		t.Fatal(err)
	}
	out := scaled.GetOutputs()[0]
	classified, err := classifier.ModelInfer(ctx, &inferencepb.ModelInferRequest{ModelName: "iris-classifier",
		Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "scaled", Datatype: "FP32", Shape: out.GetShape(), Contents: out.GetContents()}}})
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, o := range classified.GetOutputs() {
		if o.GetName() == "label" {
			for _, b := range o.GetContents().GetBytesContents() {
				labels = append(labels, string(b))
			}
		}
	}
	if want := []string{"setosa", "versicolor", "virginica"}; !slices.Equal(labels, want) {
		t.Fatalf("labels = %q, want %q", labels, want)
	}
	md, err := classifier.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: "iris-classifier"})
	if err != nil || len(md.GetInputs()) != 1 || md.GetInputs()[0].GetName() != "scaled" || len(md.GetOutputs()) != 2 {
		t.Fatalf("metadata = %v, %v", md, err)
	}
}

func TestGRPCNotReadyWhileLoading(t *testing.T) {
	ctx := context.Background()
	c := serveGRPCModel(t, "iris-scaler", false)
	if res, err := c.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: "iris-scaler"}); err != nil || res.GetReady() {
		t.Fatalf("ModelReady while loading = %v, %v", res, err)
	}
	if _, err := c.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: "iris-scaler"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("ModelMetadata while loading: %v, want UNAVAILABLE", err)
	}
	if _, err := c.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: "other"}); status.Code(err) != codes.NotFound {
		t.Fatalf("ModelReady of another model: %v, want NOT_FOUND", err)
	}
}

// A ModelInfer message is checked within the protocol's default bounds before it is decoded: a
// shape of 33 dimensions is refused with the bound's words, not read.
func TestGRPCRequestCheckedBeforeDecoding(t *testing.T) {
	c := serveGRPCModel(t, "iris-scaler", true)
	req := &inferencepb.ModelInferRequest{ModelName: "iris-scaler"}
	shape := slices.Repeat([]int64{1}, 31)
	req.Inputs = append(req.Inputs, &inferencepb.ModelInferRequest_InferInputTensor{Name: "features", Datatype: "FP32", Shape: append(shape, 1, 4),
		Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}})
	_, err := c.ModelInfer(context.Background(), req)
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != "inputs[0]: a shape of more than 32 dimensions" {
		t.Fatalf("a shape of 33 dimensions: %v", err)
	}
}
