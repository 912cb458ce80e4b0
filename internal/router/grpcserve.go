package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// The metadata of the router's gRPC answers: the request's id, the step whose answer it is or
// that failed, and the reason of a failure (pipeline_router_step_errors_total's label).
const (
	grpcHeaderRequestID = "x-request-id"
	grpcHeaderLastStep  = "x-pipeline-last-step"
	grpcHeaderReason    = "x-pipeline-reason"
)

// grpcService serves the pipeline as the Open Inference Protocol's gRPC service: one model, the
// pipeline, named as the Pipeline is.
type grpcService struct {
	inferencepb.UnimplementedGRPCInferenceServiceServer
	r     *Router
	ready func() bool
}

// newGRPCServer is the gRPC server of the pipeline, under the same limits as its HTTP server:
// messages of at most maxBodyBytes; one count of requests in flight for HTTP and gRPC together,
// a call counted from its headers to its end and refused over the count before its message is
// read; and a call that lasts longer than a request may (LongestRequest: its message sent
// slowly, say) ended.
func (s *Server) newGRPCServer(g *guard) *grpc.Server {
	limit := int(min(s.Router.bodyLimit, int64(maxGRPCMessage)))
	longest := s.LongestRequest()
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(limit), grpc.MaxSendMsgSize(limit), grpc.ForceServerCodecV2(oip.WireCodec()),
		grpc.MaxConcurrentStreams(uint32(min(g.maxInFlight, 1<<20))),
		grpc.ConnectionTimeout(10*time.Second),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 2 * time.Minute}),
		grpc.InTapHandle(func(ctx context.Context, _ *tap.Info) (context.Context, error) {
			if g.inFlight.Add(1) > g.maxInFlight {
				g.inFlight.Add(-1)
				return ctx, status.Error(codes.Unavailable, errBusy)
			}
			// The stream's context ends with the stream, or at the deadline: either way the
			// call is no longer counted.
			ctx, cancel := context.WithTimeoutCause(ctx, longest, errCallTooLong)
			context.AfterFunc(ctx, func() {
				cancel()
				g.inFlight.Add(-1)
			})
			return ctx, nil
		}),
	)
	srv.RegisterService(grpcServiceDesc(), &grpcService{r: s.Router, ready: s.ready.Load})
	return srv
}

// grpcServiceDesc is the protocol's service whose ModelInfer is grpcService.modelInfer, its
// message undecoded.
func grpcServiceDesc() *grpc.ServiceDesc {
	return oip.ServiceDesc(func(srv any, ctx context.Context, m *oip.WireMessage) (any, error) {
		return srv.(*grpcService).modelInfer(ctx, m)
	})
}

// errCallTooLong ends a gRPC call that lasted longer than any request may.
var errCallTooLong = errors.New("the call lasted longer than a request may")

// errBusy is the message of a request over the router's in-flight limit.
const errBusy = "the router serves as many requests as it may at once: try again"

// ServerLive answers that the router runs.
func (*grpcService) ServerLive(context.Context, *inferencepb.ServerLiveRequest) (*inferencepb.ServerLiveResponse, error) {
	return &inferencepb.ServerLiveResponse{Live: true}, nil
}

// ServerReady answers whether the router is ready: every mapping checked against the models.
func (g *grpcService) ServerReady(context.Context, *inferencepb.ServerReadyRequest) (*inferencepb.ServerReadyResponse, error) {
	return &inferencepb.ServerReadyResponse{Ready: g.ready()}, nil
}

// ModelReady answers whether the pipeline is ready, for its own name.
func (g *grpcService) ModelReady(_ context.Context, req *inferencepb.ModelReadyRequest) (*inferencepb.ModelReadyResponse, error) {
	if err := g.r.servesModel(req.GetName()); err != nil {
		return nil, err
	}
	return &inferencepb.ModelReadyResponse{Ready: g.ready()}, nil
}

// ModelMetadata describes the pipeline as a model: the tensors its request and answer have, as
// far as the steps' model metadata, once read, tells them.
func (g *grpcService) ModelMetadata(_ context.Context, req *inferencepb.ModelMetadataRequest) (*inferencepb.ModelMetadataResponse, error) {
	if err := g.r.servesModel(req.GetName()); err != nil {
		return nil, err
	}
	in, out := g.r.pipelineTensors()
	res := &inferencepb.ModelMetadataResponse{Name: g.r.modelName, Platform: "pipeline"}
	for _, t := range in {
		res.Inputs = append(res.Inputs, &inferencepb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
	}
	for _, t := range out {
		res.Outputs = append(res.Outputs, &inferencepb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
	}
	return res, nil
}

// servesModel refuses a name other than the pipeline's.
func (r *Router) servesModel(name string) error {
	if name != r.modelName {
		return status.Errorf(codes.NotFound, "the router serves one model, the pipeline %q", r.modelName)
	}
	return nil
}

// pipelineTensors are the tensors of the pipeline's request (those steps map from it, or the
// first step's model's inputs when none does) and of its answer (its outputs, or the last
// step's model's), described by the steps' model metadata where it has been read.
func (r *Router) pipelineTensors() (in, out []oip.TensorMetadata) {
	seen := map[string]bool{}
	for _, s := range r.steps {
		for _, i := range s.inputs {
			if t, ok := s.modelInput(i.name); ok && i.source == 0 && !seen[i.tensor] {
				seen[i.tensor] = true
				t.Name = i.tensor
				in = append(in, t)
			}
		}
	}
	if len(seen) == 0 && len(r.steps[0].inputs) == 0 {
		if m := r.steps[0].model.Load(); m != nil {
			in = m.Inputs
		}
	}
	for _, o := range r.outputs {
		if m := r.steps[o.source-1].model.Load(); m != nil {
			if t, ok := m.Output(o.tensor); ok {
				t.Name = o.name
				out = append(out, t)
			}
		}
	}
	if len(r.outputs) == 0 {
		if m := r.steps[len(r.steps)-1].model.Load(); m != nil {
			out = m.Outputs
		}
	}
	return in, out
}

// modelInfer runs one request through the pipeline (ModelInfer, grpcServiceDesc): the message,
// decoded once its encoding is within the router's bounds, made a REST request of the Open
// Inference Protocol (typed contents as JSON data, raw contents as binary data, as they are),
// and the pipeline's answer made a ModelInferResponse the same way back.
func (g *grpcService) modelInfer(ctx context.Context, wire *oip.WireMessage) (*inferencepb.ModelInferResponse, error) {
	r := g.r
	start := time.Now()
	md, _ := metadata.FromIncomingContext(ctx)
	header := headerOf(md)
	id := requestID(header)
	res, code, err := r.infer(ctx, wire, header, id)
	r.metrics.answered(code, start)
	return res, err
}

func (r *Router) infer(ctx context.Context, wire *oip.WireMessage, header http.Header, id string) (*inferencepb.ModelInferResponse, int, error) {
	trailer := metadata.Pairs(grpcHeaderRequestID, id)
	defer func() { _ = grpc.SetTrailer(ctx, trailer) }()
	refuse := func(code int, msg string) (*inferencepb.ModelInferResponse, int, error) {
		return nil, code, status.Error(grpcCodeOf(code), msg)
	}
	body, messageID, err := r.grpcRequest(wire)
	var bound *oip.LimitError
	switch {
	case status.Code(err) == codes.NotFound:
		return nil, http.StatusNotFound, err
	case errors.Is(err, bodies.ErrBudgetExceeded), errors.Is(err, oip.ErrBudgetExceeded):
		return refuse(http.StatusServiceUnavailable, bodies.ErrBudgetExceeded.Error())
	case errors.As(err, &bound):
		return refuse(http.StatusBadRequest, "the request "+overBound(bound))
	case err != nil:
		return refuse(http.StatusBadRequest, "the request is not one the pipeline can carry: "+err.Error())
	}
	rctx, cancel := context.WithTimeoutCause(ctx, r.requestTimeout, errRequestDeadline)
	defer cancel()
	resp, last, f := r.run(rctx, stepHeaders(header, r.propagate, id), body)
	if f != nil {
		if f.status != statusClientClosedRequest {
			r.log.Warn("pipeline request failed", "pipeline", r.pipeline, "step", f.step, "stepIndex", f.index,
				"url", f.url, "reason", f.reason, "status", f.status, "requestID", id, "error", f.err)
		}
		trailer.Append(grpcHeaderLastStep, f.step)
		trailer.Append(grpcHeaderReason, f.reason)
		return refuse(f.status, f.message)
	}
	defer resp.body.Release()
	trailer.Append(grpcHeaderLastStep, last)
	if resp.status >= 400 {
		return refuse(resp.status, answerError(resp))
	}
	res, err := r.grpcAnswer(resp)
	if errors.Is(err, bodies.ErrBudgetExceeded) || errors.Is(err, oip.ErrBudgetExceeded) {
		return refuse(http.StatusServiceUnavailable, bodies.ErrBudgetExceeded.Error())
	}
	if err != nil {
		r.log.Warn("pipeline answer not carried over gRPC", "pipeline", r.pipeline, "step", last, "requestID", id, "error", err)
		return refuse(http.StatusBadGateway, fmt.Sprintf("the answer of step %s cannot be carried over gRPC: %v", last, err))
	}
	res.Id = messageID
	return res, http.StatusOK, nil
}

// grpcRequest is the REST request of the Open Inference Protocol made of wire, a
// ModelInferRequest decoded once within the router's bounds, and the id it gives. The request
// names the pipeline, or is refused NotFound.
func (r *Router) grpcRequest(wire *oip.WireMessage) (payload, string, error) {
	req, decoded, err := r.reader.UnmarshalGRPCRequest(wire.Bytes())
	wire.Free()
	if err != nil {
		return payload{}, "", err
	}
	defer r.budget.Release(decoded)
	if err := r.servesModel(req.GetModelName()); err != nil {
		return payload{}, "", err
	}
	outputs := make([]string, len(req.GetOutputs()))
	for i, o := range req.GetOutputs() {
		outputs[i] = o.GetName()
	}
	d, binary, err := r.restBody(oip.GRPCTensorsOf(req.GetInputs()), req.GetRawInputContents(), func(w *bodies.Buffer, ts []oip.Tensor) error {
		_, err := oip.WriteRequest(w, ts, outputs, false)
		return err
	})
	if err != nil {
		return payload{}, "", err
	}
	return d.payload(binary), req.GetId(), nil
}

// grpcAnswer is the ModelInferResponse made of the pipeline's answer, a REST answer of the Open
// Inference Protocol.
func (r *Router) grpcAnswer(resp *stepResponse) (*inferencepb.ModelInferResponse, error) {
	// gRPC writes the answer after the handler returned and the body's blocks went to other
	// requests: its raw contents are slices of a copy of their own, whose budget is released
	// once the answer is made.
	outputs, raw, held, err := r.grpcTensorsOf(resp.payload, r.reader.Response, "answer")
	r.budget.Release(held)
	if err != nil {
		return nil, fmt.Errorf("it %w", err)
	}
	res := &inferencepb.ModelInferResponse{ModelName: r.modelName, RawOutputContents: raw}
	for _, t := range outputs {
		res.Outputs = append(res.Outputs, &inferencepb.ModelInferResponse_InferOutputTensor{Name: t.Name, Datatype: t.Datatype,
			Shape: t.Shape, Parameters: t.Parameters, Contents: t.Contents})
	}
	return res, nil
}

// answerError is the message of a step's 4xx answer passed back over gRPC: its "error" when it
// is a JSON object that has one (the protocol's error answer), else its status.
func answerError(resp *stepResponse) string {
	if isJSON(resp.contentType) && resp.body.Len() <= maxAnswerErrorBytes {
		var e struct {
			Error string `json:"error"`
		}
		if resp.body.Join() == nil && json.Unmarshal(resp.body.Bytes(), &e) == nil && e.Error != "" {
			return e.Error
		}
	}
	return "the pipeline's last step answered " + statusText(resp.status)
}

// maxAnswerErrorBytes is the largest 4xx answer whose error is read for the gRPC status.
const maxAnswerErrorBytes = 64 << 10

// headerOf is gRPC metadata as HTTP headers, for the headers the router passes on to steps.
func headerOf(md metadata.MD) http.Header {
	h := make(http.Header, len(md))
	for k, v := range md {
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || strings.HasSuffix(k, "-bin") {
			continue
		}
		h[http.CanonicalHeaderKey(k)] = v
	}
	return h
}

// serveGRPC serves srv on ln until it is stopped.
func serveGRPC(srv *grpc.Server, ln net.Listener) error {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve gRPC on %s: %w", ln.Addr(), err)
	}
	return nil
}
