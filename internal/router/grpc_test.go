package router

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// grpcModel is a server of the Open Inference Protocol's gRPC service with one FP32 model on a
// loopback address, written from the protocol's specification: it reads typed fp32_contents
// or raw_input_contents (little-endian FP32) and answers typed contents, or raw contents when
// rawOut is set.
type grpcModel struct {
	inferencepb.UnimplementedGRPCInferenceServiceServer
	name            string
	inputs, outputs []modelTensor
	compute         func(map[string][]float32) map[string][]float32
	rawOut          bool
	// last is the last ModelInfer request the model got; metadata its metadata.
	last atomic.Pointer[inferencepb.ModelInferRequest]
	md   atomic.Pointer[metadata.MD]
	// fail, when set, is the error of the next calls while it returns one.
	fail func() error
	addr string
	// accepted counts the connections the model's server accepted.
	accepted atomic.Int32
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func newGRPCModel(t *testing.T, name string, inputs, outputs []modelTensor, compute func(map[string][]float32) map[string][]float32) *grpcModel {
	t.Helper()
	m := &grpcModel{name: name, inputs: inputs, outputs: outputs, compute: compute}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	inferencepb.RegisterGRPCInferenceServiceServer(srv, m)
	go func() { _ = srv.Serve(countingListener{ln, &m.accepted}) }()
	t.Cleanup(srv.Stop)
	m.addr = ln.Addr().String()
	return m
}

func (m *grpcModel) url() string { return "grpc://" + m.addr }

func (m *grpcModel) ModelMetadata(_ context.Context, req *inferencepb.ModelMetadataRequest) (*inferencepb.ModelMetadataResponse, error) {
	if req.GetName() != m.name {
		return nil, status.Errorf(codes.NotFound, "no model %q", req.GetName())
	}
	res := &inferencepb.ModelMetadataResponse{Name: m.name, Platform: "test"}
	for _, t := range m.inputs {
		res.Inputs = append(res.Inputs, &inferencepb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
	}
	for _, t := range m.outputs {
		res.Outputs = append(res.Outputs, &inferencepb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
	}
	return res, nil
}

func (m *grpcModel) ModelInfer(ctx context.Context, req *inferencepb.ModelInferRequest) (*inferencepb.ModelInferResponse, error) {
	m.last.Store(req)
	md, _ := metadata.FromIncomingContext(ctx)
	m.md.Store(&md)
	if m.fail != nil {
		if err := m.fail(); err != nil {
			return nil, err
		}
	}
	if req.GetModelName() != m.name {
		return nil, status.Errorf(codes.NotFound, "no model %q", req.GetModelName())
	}
	in := map[string][]float32{}
	for i, t := range req.GetInputs() {
		if len(req.GetRawInputContents()) > 0 {
			raw := req.GetRawInputContents()[i]
			for j := 0; j+4 <= len(raw); j += 4 {
				in[t.GetName()] = append(in[t.GetName()], math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
			}
			continue
		}
		in[t.GetName()] = t.GetContents().GetFp32Contents()
	}
	for _, want := range m.inputs {
		if _, ok := in[want.Name]; !ok {
			return nil, status.Errorf(codes.InvalidArgument, "input %s missing", want.Name)
		}
	}
	out := m.compute(in)
	res := &inferencepb.ModelInferResponse{ModelName: m.name, Id: req.GetId()}
	for _, o := range m.outputs {
		if len(req.GetOutputs()) > 0 && !slices.ContainsFunc(req.GetOutputs(),
			func(r *inferencepb.ModelInferRequest_InferRequestedOutputTensor) bool { return r.GetName() == o.Name }) {
			continue
		}
		t := &inferencepb.ModelInferResponse_InferOutputTensor{Name: o.Name, Datatype: "FP32", Shape: []int64{1, int64(len(out[o.Name]))}}
		if m.rawOut {
			var raw []byte
			for _, f := range out[o.Name] {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
			}
			res.RawOutputContents = append(res.RawOutputContents, raw)
		} else {
			t.Contents = &inferencepb.InferTensorContents{Fp32Contents: out[o.Name]}
		}
		res.Outputs = append(res.Outputs, t)
	}
	return res, nil
}

// grpcAdd is addModel served over gRPC.
func grpcAdd(t *testing.T) *grpcModel {
	return newGRPCModel(t, "add",
		[]modelTensor{{"a", "FP32", fp32x4}, {"b", "FP32", fp32x4}},
		[]modelTensor{{"sum", "FP32", fp32x4}}, add)
}

// grpcEcho answers its input x as y.
func grpcEcho(t *testing.T) *grpcModel {
	return newGRPCModel(t, "echo", []modelTensor{{"x", "FP32", fp32x4}}, []modelTensor{{"y", "FP32", fp32x4}},
		func(in map[string][]float32) map[string][]float32 { return map[string][]float32{"y": in["x"]} })
}

// serveGRPCRouter serves cfg over HTTP and gRPC, and is a client of its gRPC service.
func serveGRPCRouter(t *testing.T, cfg config.Config) (*servedRouter, inferencepb.GRPCInferenceServiceClient) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := serveRouterWith(t, cfg, func(s *Server) { s.GRPC = ln })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := inferencepb.NewGRPCInferenceServiceClient(conn)
	eventually(t, "ready over gRPC", func() bool {
		res, err := c.ServerReady(context.Background(), &inferencepb.ServerReadyRequest{})
		return err == nil && res.GetReady()
	})
	return s, c
}

func fp32Input(name string, data ...float32) *inferencepb.ModelInferRequest_InferInputTensor {
	return &inferencepb.ModelInferRequest_InferInputTensor{Name: name, Datatype: "FP32", Shape: []int64{1, int64(len(data))},
		Contents: &inferencepb.InferTensorContents{Fp32Contents: data}}
}

// A REST → gRPC → REST chain: scale (REST) doubles input0, add (gRPC) adds input0 to it, and a
// second scale (REST) doubles the sum: 6 × input0. The gRPC step gets typed contents under its
// inputs' names, and its model's metadata, read with ModelMetadata, checks the mappings.
func TestGRPCStepBetweenRESTSteps(t *testing.T) {
	scale, add, scale2 := scaleModel(t, 0), grpcAdd(t), scaleModel(t, 0)
	cfg := config.Config{Steps: []config.Step{
		{Name: "scale", URL: scale.inferURL(), Protocol: config.ProtocolOpenInference, MetadataURL: scale.metadataURL(),
			Inputs: []config.TensorInput{{Name: "x", Tensor: "input0"}}},
		{Name: "add", URL: add.url(), Protocol: config.ProtocolOpenInferenceGRPC, Model: "add",
			Inputs: []config.TensorInput{{Name: "a", Step: "scale", Tensor: "y"}, {Name: "b", Tensor: "input0"}}},
		{Name: "scale-again", URL: scale2.inferURL(), Protocol: config.ProtocolOpenInference, MetadataURL: scale2.metadataURL(),
			Inputs: []config.TensorInput{{Name: "x", Step: "add", Tensor: "sum"}}},
	}}
	s := serveRouter(t, cfg, 0)
	eventually(t, "ready once the models' metadata is read", func() bool {
		code, _ := get(t, s.adminURL+"/readyz")
		return code == http.StatusOK
	})
	a := post(t, s.url, "application/json", jsonRequest, http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
	if a.status != http.StatusOK {
		t.Fatalf("answer %d %s", a.status, a.body)
	}
	if got, want := fmt.Sprint(outputsOf(t, a)["y"]), "[6 12 18 24]"; got != want {
		t.Fatalf("y = %s, want %s (6 × input0)", got, want)
	}
	req := add.last.Load()
	if req.GetModelName() != "add" || len(req.GetInputs()) != 2 || req.GetInputs()[0].GetName() != "a" ||
		fmt.Sprint(req.GetInputs()[1].GetContents().GetFp32Contents()) != "[1 2 3 4]" || len(req.GetRawInputContents()) != 0 {
		t.Fatalf("the gRPC step's request = %v", req)
	}
	if md := *add.md.Load(); md.Get("traceparent") == nil || md.Get("x-request-id") == nil || fmt.Sprint(md.Get("x-pipeline-step")) != "[add]" {
		t.Fatalf("the gRPC step's metadata lacks the trace, the request id or its step's name: %v", md)
	}
}

// A mapping the gRPC step's model metadata refuses keeps the router from being ready.
func TestGRPCStepMappingRefusedByMetadata(t *testing.T) {
	add := grpcAdd(t)
	problems := refusedByMetadata(t, config.Config{Steps: []config.Step{
		{Name: "add", URL: add.url(), Protocol: config.ProtocolOpenInferenceGRPC, Model: "add",
			Inputs: []config.TensorInput{{Name: "a", Tensor: "input0"}, {Name: "c", Tensor: "input0"}}},
	}})
	if len(problems) != 1 || problems[0] != `input "c" of step 1 (add): model add has no input "c" (its inputs: a, b)` {
		t.Fatalf("problems = %q", problems)
	}
}

// A gRPC client calls the pipeline of REST steps: its typed contents become the REST request,
// and the answer's JSON tensors typed contents again.
func TestGRPCCallerOfRESTSteps(t *testing.T) {
	scale, add := scaleModel(t, 0), addModel(t, "FP32")
	cfg := mappedConfig(scale, add, "y")
	cfg.Pipeline = "demo/detect"
	_, c := serveGRPCRouter(t, cfg)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-request-id", "grpc-1")
	var trailer metadata.MD
	res, err := c.ModelInfer(ctx, &inferencepb.ModelInferRequest{ModelName: "detect", Id: "r1",
		Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{fp32Input("input0", 1, 2, 3, 4)}}, grpc.Trailer(&trailer))
	if err != nil {
		t.Fatal(err)
	}
	if res.GetModelName() != "detect" || res.GetId() != "r1" || len(res.GetOutputs()) != 1 ||
		fmt.Sprint(res.GetOutputs()[0].GetContents().GetFp32Contents()) != "[3 6 9 12]" {
		t.Fatalf("answer = %v", res)
	}
	if fmt.Sprint(trailer.Get("x-request-id"), trailer.Get("x-pipeline-last-step")) != "[grpc-1] [add]" {
		t.Fatalf("trailer = %v", trailer)
	}

	// The pipeline is the one model: its metadata is its request's tensors and its answer's.
	md, err := c.ModelMetadata(context.Background(), &inferencepb.ModelMetadataRequest{Name: "detect"})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.GetInputs()) != 1 || md.GetInputs()[0].GetName() != "input0" || len(md.GetOutputs()) != 1 || md.GetOutputs()[0].GetName() != "sum" {
		t.Fatalf("metadata = %v", md)
	}
	if ready, err := c.ModelReady(context.Background(), &inferencepb.ModelReadyRequest{Name: "detect"}); err != nil || !ready.GetReady() {
		t.Fatalf("ModelReady = %v, %v", ready, err)
	}
	if _, err := c.ModelReady(context.Background(), &inferencepb.ModelReadyRequest{Name: "other"}); status.Code(err) != codes.NotFound {
		t.Fatalf("ModelReady of another model: %v, want NotFound", err)
	}

	// A request the pipeline cannot carry, and one a step's mapping refuses, are the caller's.
	_, err = c.ModelInfer(context.Background(), &inferencepb.ModelInferRequest{ModelName: "detect",
		Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "input0", Datatype: "FP32", Shape: []int64{1, 4},
			Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{1, 2}}}}})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument ||
		!strings.Contains(st.Message(), "its contents must be 4 elements of FP32 (shape [1,4])") {
		t.Fatalf("short contents: %v", err)
	}
	_, err = c.ModelInfer(context.Background(), &inferencepb.ModelInferRequest{ModelName: "detect",
		Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{fp32Input("other", 1, 2, 3, 4)}}, grpc.Trailer(&trailer))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument ||
		st.Message() != `input "x" of step 1 (scale): the pipeline's request has no tensor "input0"` ||
		fmt.Sprint(trailer.Get("x-pipeline-reason")) != "[bad_request]" {
		t.Fatalf("missing tensor: %v (trailer %v)", err, trailer)
	}
}

// Raw contents cross the router as bytes: a gRPC caller's raw_input_contents reach a gRPC step
// as they were sent, and the step's raw_output_contents come back as it sent them.
func TestGRPCRawContentsCrossUntouched(t *testing.T) {
	echo := grpcEcho(t)
	echo.rawOut = true
	_, c := serveGRPCRouter(t, config.Config{Pipeline: "ns/raw", Steps: []config.Step{
		{Name: "echo", URL: echo.url(), Protocol: config.ProtocolOpenInferenceGRPC, Model: "echo"},
	}})
	// Bytes no JSON could carry: a NaN with a payload, a negative zero, a subnormal.
	var raw []byte
	for _, bits := range []uint32{0x7fc00123, 0x80000000, 0x00000001, math.Float32bits(2.5)} {
		raw = binary.LittleEndian.AppendUint32(raw, bits)
	}
	res, err := c.ModelInfer(context.Background(), &inferencepb.ModelInferRequest{ModelName: "raw",
		Inputs:           []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}}},
		RawInputContents: [][]byte{raw}})
	if err != nil {
		t.Fatal(err)
	}
	if got := echo.last.Load().GetRawInputContents(); len(got) != 1 || !bytes.Equal(got[0], raw) {
		t.Fatalf("the step got raw contents %x, want %x", got, raw)
	}
	if len(res.GetRawOutputContents()) != 1 || !bytes.Equal(res.GetRawOutputContents()[0], raw) || res.GetOutputs()[0].GetName() != "y" {
		t.Fatalf("answer = %v, want raw contents %x", res, raw)
	}
}

// A gRPC step's failures: UNAVAILABLE is retried, a client error is passed back with its
// message, INTERNAL fails the request naming the step.
func TestGRPCStepFailures(t *testing.T) {
	echo := grpcEcho(t)
	cfg := config.Config{Steps: []config.Step{
		{Name: "echo", URL: echo.url(), Protocol: config.ProtocolOpenInferenceGRPC, Model: "echo", Retries: 2},
	}}
	tr := newTestRouter(t, cfg)
	request := `{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}`

	var calls atomic.Int32
	echo.fail = func() error {
		if calls.Add(1) <= 2 {
			return status.Error(codes.Unavailable, "warming up")
		}
		return nil
	}
	if a := post(t, tr.url, "application/json", request, nil); a.status != http.StatusOK || fmt.Sprint(outputsOf(t, a)["y"]) != "[1 2 3 4]" {
		t.Fatalf("after two UNAVAILABLE: %d %s", a.status, a.body)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d calls, want 3", calls.Load())
	}

	echo.fail = func() error { return status.Error(codes.InvalidArgument, "x must be positive") }
	if a := post(t, tr.url, "application/json", request, nil); a.status != http.StatusBadRequest || a.body != `{"error":"x must be positive"}` {
		t.Fatalf("INVALID_ARGUMENT: %d %s", a.status, a.body)
	}

	echo.fail = func() error { return status.Error(codes.Internal, "out of memory") }
	a := post(t, tr.url, "application/json", request, nil)
	if e := a.errorBody(t); a.status != http.StatusBadGateway || e.Error != "step 1 (echo) answered gRPC INTERNAL" || e.Reason != ReasonServerError {
		t.Fatalf("INTERNAL: %d %s", a.status, a.body)
	}

	// A call the step cancelled itself is its failure, not an answer to pass back.
	echo.fail = func() error { return status.Error(codes.Canceled, "shutting down") }
	a = post(t, tr.url, "application/json", request, nil)
	if e := a.errorBody(t); a.status != http.StatusBadGateway || e.Error != "step 1 (echo) answered gRPC CANCELLED" {
		t.Fatalf("CANCELLED: %d %s", a.status, a.body)
	}

	// A body that is not an Open Inference Protocol request cannot be made a ModelInfer call:
	// the caller's error when it is the pipeline's request.
	echo.fail = nil
	a = post(t, tr.url, "text/plain", "hello", nil)
	if e := a.errorBody(t); a.status != http.StatusBadRequest ||
		e.Error != "step 1 (echo) could not be called over gRPC: its request is not an Open Inference Protocol request" {
		t.Fatalf("plain text: %d %s", a.status, a.body)
	}
}

// HTTP and gRPC requests share one count of requests in flight: over --max-in-flight a gRPC
// call is refused UNAVAILABLE before its message is read.
func TestGRPCSharesTheInFlightLimit(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	step := newStep(t, func(w http.ResponseWriter, _ *http.Request) {
		first.Do(func() { close(arrived) })
		<-release
		_, _ = w.Write([]byte(`{}`))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := serveRouterWith(t, config.Config{Pipeline: "ns/p", Steps: []config.Step{{Name: "slow", URL: step.URL}}},
		func(s *Server) { s.GRPC, s.MaxInFlight = ln, 1 })
	done := make(chan answer)
	go func() { done <- post(t, s.url, "application/json", "{}", nil) }()
	<-arrived
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_, err = inferencepb.NewGRPCInferenceServiceClient(conn).ModelInfer(context.Background(), &inferencepb.ModelInferRequest{ModelName: "p",
		Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{fp32Input("x", 1)}})
	if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != errBusy {
		t.Fatalf("a gRPC call over the limit: %v, want UNAVAILABLE %q", err, errBusy)
	}
	close(release)
	if a := <-done; a.status != http.StatusOK {
		t.Fatalf("the HTTP request: %d %s", a.status, a.body)
	}
	// Once the HTTP request is done, the gRPC call is served (the step answers {} now, which is
	// no Open Inference Protocol answer: the error says so).
	_, err = inferencepb.NewGRPCInferenceServiceClient(conn).ModelInfer(context.Background(), &inferencepb.ModelInferRequest{ModelName: "p",
		Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{fp32Input("x", 1)}})
	if st := status.Convert(err); st.Code() == codes.Unavailable {
		t.Fatalf("a gRPC call under the limit: %v", err)
	}
}

// The calls to a gRPC step take several connections in turn, each replaced once a minute old,
// so that a Service's virtual address spreads them over the step's pods, new ones included.
func TestGRPCStepCallsSpreadOverConnectionsReplacedWithAge(t *testing.T) {
	echo := grpcEcho(t)
	var (
		mu  sync.Mutex
		now = time.Unix(1_700_000_000, 0)
	)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	tr := newTestRouterWith(t, config.Config{Steps: []config.Step{
		{Name: "echo", URL: echo.url(), Protocol: config.ProtocolOpenInferenceGRPC, Model: "echo"},
	}}, io.Discard, func(o *Options) { o.Clock = clock })
	request := `{"inputs":[{"name":"x","shape":[1,1],"datatype":"FP32","data":[1]}]}`
	calls := func() {
		for range 2 * grpcConnections {
			if a := post(t, tr.url, "application/json", request, nil); a.status != http.StatusOK {
				t.Fatalf("answer %d %s", a.status, a.body)
			}
		}
	}
	calls()
	if got := echo.accepted.Load(); got != grpcConnections {
		t.Fatalf("%d calls took %d connections, want %d", 2*grpcConnections, got, grpcConnections)
	}
	mu.Lock()
	now = now.Add(grpcConnectionAge)
	mu.Unlock()
	calls()
	if got := echo.accepted.Load(); got != 2*grpcConnections {
		t.Fatalf("after a minute, %d connections in all, want %d: every one replaced once", got, 2*grpcConnections)
	}
}

// Concurrent callers each get their own raw answer back, byte for byte: an answer's raw contents
// are not read from memory another request reuses.
func TestGRPCRawAnswersOfConcurrentCallsStayTheirs(t *testing.T) {
	echo := grpcEcho(t)
	echo.rawOut = true
	_, c := serveGRPCRouter(t, config.Config{Pipeline: "ns/raw", Steps: []config.Step{
		{Name: "echo", URL: echo.url(), Protocol: config.ProtocolOpenInferenceGRPC, Model: "echo"},
	}})
	errs := make(chan error, 16)
	for caller := range 16 {
		go func() {
			for n := range 20 {
				var raw []byte
				for i := range 4 {
					raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(caller*1000+n*10+i)))
				}
				res, err := c.ModelInfer(context.Background(), &inferencepb.ModelInferRequest{ModelName: "raw",
					Inputs:           []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4}}},
					RawInputContents: [][]byte{raw}})
				if err == nil && (len(res.GetRawOutputContents()) != 1 || !bytes.Equal(res.GetRawOutputContents()[0], raw)) {
					err = fmt.Errorf("caller %d call %d got %x, sent %x", caller, n, res.GetRawOutputContents(), raw)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
