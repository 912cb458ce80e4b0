package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// grpcStep is how a step of protocol OpenInferenceProtocolGRPC is called: its service over
// grpcConnections HTTP/2 connections without TLS, the calls taking them in turn, and the model
// its calls name. gRPC carries every call on one connection, which a Service's virtual address
// gives to one pod: several connections, each replaced once grpcConnectionAge old, spread the
// calls over a step's pods, new ones included.
type grpcStep struct {
	target string
	model  string
	opts   []grpc.DialOption
	// drain is how long a replaced connection stays open for the calls still on it: longer
	// than a call may take.
	drain time.Duration
	now   func() time.Time
	next  atomic.Uint64
	mu    sync.Mutex
	conns [grpcConnections]grpcConn
}

// grpcConn is one connection to a gRPC step and when it was made.
type grpcConn struct {
	conn *grpc.ClientConn
	made time.Time
}

// The connections to a gRPC step.
const (
	grpcConnections   = 4
	grpcConnectionAge = time.Minute
)

// newGRPCStep makes the client of the step at rawURL (grpc://host:port) whose calls take at
// most timeout (a metadata read, metadataTimeout). No connection is made before the first call.
func newGRPCStep(rawURL, model string, bodyLimit int64, timeout time.Duration, now func() time.Time) (*grpcStep, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	limit := int(min(bodyLimit, int64(maxGRPCMessage)))
	g := &grpcStep{target: u.Host, model: model, drain: max(timeout, metadataTimeout) + time.Second, now: now,
		opts: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limit), grpc.MaxCallSendMsgSize(limit), grpc.ForceCodecV2(oip.WireCodec())),
			grpc.WithUserAgent("pipeline-router")}}
	// The target is checked once here: a connection made later cannot fail to be made.
	c, err := grpc.NewClient(g.target, g.opts...)
	if err != nil {
		return nil, err
	}
	g.conns[0] = grpcConn{conn: c, made: now()}
	return g, nil
}

// conn is the next connection in turn, replacing it first when it is old; the connection
// replaced is closed once the calls on it are done.
func (g *grpcStep) conn() *grpc.ClientConn {
	i := g.next.Add(1) % grpcConnections
	g.mu.Lock()
	defer g.mu.Unlock()
	c := &g.conns[i]
	if c.conn != nil && g.now().Sub(c.made) < grpcConnectionAge {
		return c.conn
	}
	if old := c.conn; old != nil {
		time.AfterFunc(g.drain, func() { _ = old.Close() })
	}
	conn, err := grpc.NewClient(g.target, g.opts...)
	if err != nil {
		// The target was made a client of once: keep the old connection rather than none.
		return c.conn
	}
	*c = grpcConn{conn: conn, made: g.now()}
	return c.conn
}

// invoke calls method on conn with req, its answer received undecoded into res (the
// connection's codec is oip.WireCodec).
func invoke(ctx context.Context, conn *grpc.ClientConn, method string, req any, res *oip.WireMessage, opts ...grpc.CallOption) error {
	err := conn.Invoke(ctx, method, req, res, opts...)
	if err != nil {
		// The answer may have come before the call failed.
		res.Free()
	}
	return err
}

// maxGRPCMessage is the largest message gRPC is asked to take: its sizes are ints.
const maxGRPCMessage = 1<<31 - 1

// attemptGRPC makes one ModelInfer call to step s with in, a REST body of the Open Inference
// Protocol made into the call's message, and makes its answer a REST body again: the rest of the
// router (tensor mapping, stopWhen, the pipeline's answer) reads it as it reads any step's.
func (r *Router) attemptGRPC(ctx context.Context, s *step, header http.Header, in payload) (*stepResponse, *attemptError) {
	req, held, aerr := r.inferRequest(s, in)
	if aerr != nil {
		return nil, aerr
	}
	// What the request holds (a copy of the body, which its raw contents are slices of) is
	// counted until the call is done.
	defer r.budget.Release(held)
	callCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var wire oip.WireMessage
	err := invoke(metadata.NewOutgoingContext(callCtx, outgoingMetadata(header)), s.grpc.conn(),
		inferencepb.GRPCInferenceService_ModelInfer_FullMethodName, req, &wire)
	if err != nil {
		if ctx.Err() != nil {
			return nil, classify(ctx, err, s.timeout)
		}
		return r.grpcFailure(s, err)
	}
	res, decoded, err := r.reader.UnmarshalGRPCResponse(wire.Bytes())
	wire.Free()
	if err != nil {
		return nil, r.grpcAnswerFailure(s, err)
	}
	defer r.budget.Release(decoded)
	return r.restAnswer(s, res.GetModelName(), res.GetOutputs(), res.GetRawOutputContents())
}

// inferRequest is the ModelInfer request of step s made of in, and what it holds of the
// router's budget, to be released once the call is done. A body that is not an Open Inference
// Protocol request is the caller's error when it is the pipeline's request as it came (the first
// step's, without inputs), else a failure to map tensors.
func (r *Router) inferRequest(s *step, in payload) (*inferencepb.ModelInferRequest, int64, *attemptError) {
	// The body is copied, not joined: another step may be sending it at the same time.
	inputs, raw, held, err := r.grpcTensorsOf(in, r.reader.Request, "request")
	var be *bodyError
	switch {
	case errors.Is(err, bodies.ErrBudgetExceeded):
		return nil, 0, &attemptError{reason: ReasonBufferBudget,
			what: "could not be called: the router holds maxBufferedBytes of bodies already", err: err}
	case errors.As(err, &be):
		reason := ReasonTensorMapping
		if s.index == 1 && s.inputs == nil {
			reason = ReasonBadRequest
		}
		return nil, 0, &attemptError{reason: reason, what: "could not be called over gRPC: its request " + be.what,
			err: fmt.Errorf("make the ModelInfer request of %s: %w", s.url, be.err)}
	}
	req := &inferencepb.ModelInferRequest{ModelName: s.grpc.model, RawInputContents: raw}
	for _, t := range inputs {
		req.Inputs = append(req.Inputs, &inferencepb.ModelInferRequest_InferInputTensor{Name: t.Name, Datatype: t.Datatype,
			Shape: t.Shape, Parameters: t.Parameters, Contents: t.Contents})
	}
	for _, name := range s.outputs {
		req.Outputs = append(req.Outputs, &inferencepb.ModelInferRequest_InferRequestedOutputTensor{Name: name})
	}
	return req, held, nil
}

// bodyError is a REST body of the protocol that cannot be made a gRPC message: what is wrong
// with it, in fixed words that complete "its request ..." or "it ...", and the detail.
type bodyError struct {
	what string
	err  error
}

func (e *bodyError) Error() string { return e.what + ": " + e.err.Error() }

// grpcTensorsOf reads p, a REST body of the Open Inference Protocol (a request or an answer,
// as kind says, read by read), into the tensors of a gRPC message, from a copy of the body of
// their own: the raw contents are slices of it, which neither a step sending the same body nor
// the reuse of its blocks once released changes. held is what the copy and the reading hold of
// the router's budget, to be released once the message is no longer needed. The error is
// bodies.ErrBudgetExceeded when the budget is full, else a *bodyError.
func (r *Router) grpcTensorsOf(p payload, read func([]byte, int64) ([]oip.Tensor, int64, error),
	kind string) (tensors []oip.GRPCTensor, raw [][]byte, held int64, err error) {
	if p.contentEncoding != "" {
		return nil, nil, 0, &bodyError{what: "is encoded (Content-Encoding " + strconv.Quote(p.contentEncoding) + ")",
			err: errors.New("the router neither decodes nor encodes bodies")}
	}
	length, err := oip.ParseHeaderLength(p.inferenceHeader)
	if err != nil {
		return nil, nil, 0, &bodyError{what: "has a wrong " + oip.HeaderInferenceHeaderLength, err: err}
	}
	size := p.body.Len()
	if !r.budget.TryAcquire(size) {
		return nil, nil, 0, bodies.ErrBudgetExceeded
	}
	defer func() {
		if err != nil {
			r.budget.Release(held)
			held = 0
		}
	}()
	held = size
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := p.body.WriteTo(buf); err != nil {
		return nil, nil, held, &bodyError{what: "could not be read", err: err}
	}
	doc, binary, err := oip.Split(buf.Bytes(), length)
	if err != nil {
		return nil, nil, held, &bodyError{what: "has a wrong " + oip.HeaderInferenceHeaderLength, err: err}
	}
	ts, reading, err := read(doc, int64(len(binary)))
	if err != nil {
		return nil, nil, held, &bodyError{what: "is not an Open Inference Protocol " + kind, err: err}
	}
	held += reading
	if tensors, raw, err = oip.ToGRPC(ts, binary); err != nil {
		return nil, nil, held, &bodyError{what: "has a tensor gRPC cannot carry", err: err}
	}
	return tensors, raw, held, nil
}

// restAnswer is the answer of a ModelInfer call as a REST answer of the Open Inference
// Protocol: typed contents as JSON data, raw contents as binary data after the document.
func (r *Router) restAnswer(s *step, model string, outputs []*inferencepb.ModelInferResponse_InferOutputTensor,
	raw [][]byte) (*stepResponse, *attemptError) {
	body, binary, err := r.restBody(oip.GRPCTensorsOf(outputs), raw, func(w *bodies.Buffer, ts []oip.Tensor) error {
		_, err := oip.WriteResponse(w, model, ts)
		return err
	})
	if err != nil {
		return nil, r.grpcAnswerFailure(s, err)
	}
	return &stepResponse{payload: body.payload(binary), status: http.StatusOK, header: http.Header{}}, nil
}

// grpcAnswerFailure is the ModelInfer answer of step s that could not be decoded or made a REST
// answer, err why.
func (r *Router) grpcAnswerFailure(s *step, err error) *attemptError {
	detail := fmt.Errorf("read the ModelInfer answer of %s: %w", s.url, err)
	var bound *oip.LimitError
	switch {
	case errors.Is(err, bodies.ErrBudgetExceeded), errors.Is(err, oip.ErrBudgetExceeded):
		return &attemptError{reason: ReasonBufferBudget, what: "answered while the router holds maxBufferedBytes of bodies already", err: detail}
	case errors.As(err, &bound):
		return &attemptError{reason: ReasonServerError, status: http.StatusBadGateway,
			what: "answered a ModelInfer response that " + overBound(bound), err: detail}
	}
	return &attemptError{reason: ReasonServerError, status: http.StatusBadGateway,
		what: "answered a ModelInfer response that is not a valid one", err: detail}
}

// restDoc is a REST body made of gRPC tensors: its buffer and the length of its JSON document.
type restDoc struct {
	buf       *bodies.Buffer
	docLength int64
}

// payload is the body as one the steps are sent.
func (d restDoc) payload(binary bool) payload {
	p := payload{body: d.buf, contentType: "application/json"}
	if binary {
		p.contentType = "application/octet-stream"
		p.inferenceHeader = strconv.FormatInt(d.docLength, 10)
	}
	return p
}

// restBody writes the document of tensors (a request's or an answer's, with doc) and the raw
// contents after it into a new buffer counted against the router's budget, and reports whether
// the body is binary.
func (r *Router) restBody(tensors []oip.GRPCTensor, raw [][]byte, doc func(*bodies.Buffer, []oip.Tensor) error) (restDoc, bool, error) {
	ts, held, err := r.reader.FromGRPC(tensors, raw)
	if err != nil {
		return restDoc{}, false, err
	}
	defer r.budget.Release(held)
	out := bodies.NewBuffer(r.budget)
	err = doc(out, ts)
	d := restDoc{buf: out, docLength: out.Len()}
	for i := 0; err == nil && i < len(raw); i++ {
		err = out.Append(raw[i])
	}
	if err != nil {
		out.Release()
		return restDoc{}, false, err
	}
	return d, len(raw) > 0, nil
}

// grpcFailure is a ModelInfer call that failed with err: a status the router passes back as a
// client error (a stepResponse of the HTTP status gRPC's own mapping gives it, its message in
// the body as {"error": ...}), or an attempt that failed.
func (r *Router) grpcFailure(s *step, err error) (*stepResponse, *attemptError) {
	st := status.Convert(err)
	detail := fmt.Errorf("ModelInfer of %s: %w", s.url, err)
	code := httpStatusOf(st.Code())
	switch st.Code() {
	case codes.DeadlineExceeded:
		return nil, &attemptError{reason: ReasonTimeout, retryable: true, what: "timed out after " + s.timeout.String(), err: detail}
	case codes.Unavailable:
		return nil, &attemptError{reason: ReasonConnection, retryable: true, what: "could not be reached (gRPC " + grpcCodeName(st.Code()) + ")", err: detail}
	case codes.ResourceExhausted:
		if strings.HasPrefix(st.Message(), "grpc: received message larger than max") {
			return nil, &attemptError{reason: ReasonResponseTooLarge,
				what: fmt.Sprintf("answered more than maxBodyBytes (%d bytes)", r.bodyLimit), err: detail}
		}
	}
	if code >= 500 || st.Code() == codes.Canceled {
		// A call the step cancelled itself (the router's own ends were told apart above) is
		// the step's failure, not an answer.
		if code < 500 {
			code = http.StatusBadGateway
		}
		return nil, &attemptError{reason: ReasonServerError, status: code,
			what: "answered gRPC " + grpcCodeName(st.Code()), err: detail}
	}
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{st.Message()})
	buf := bodies.NewBuffer(r.budget)
	if err := buf.Append(body); err != nil {
		buf.Release()
		return nil, &attemptError{reason: ReasonBufferBudget, what: "answered while the router holds maxBufferedBytes of bodies already", err: err}
	}
	h := http.Header{"Grpc-Status": {strconv.Itoa(int(st.Code()))}}
	return &stepResponse{payload: payload{body: buf, contentType: "application/json"}, status: code, header: h}, nil
}

// outgoingMetadata is the headers passed on to a step as gRPC metadata.
func outgoingMetadata(h http.Header) metadata.MD {
	md := make(metadata.MD, len(h))
	for k, v := range h {
		if k == "User-Agent" {
			continue
		}
		md[strings.ToLower(k)] = v
	}
	return md
}

// grpcMetadata reads the model metadata of a gRPC step with ModelMetadata: an answer of at
// most maxMetadataBytes, as a REST step's, checked before it is decoded.
func grpcMetadata(ctx context.Context, g *grpcStep) (*oip.ModelMetadata, error) {
	var wire oip.WireMessage
	err := invoke(ctx, g.conn(), inferencepb.GRPCInferenceService_ModelMetadata_FullMethodName,
		&inferencepb.ModelMetadataRequest{Name: g.model}, &wire, grpc.MaxCallRecvMsgSize(maxMetadataBytes))
	if err != nil {
		return nil, err
	}
	res, err := oip.UnmarshalGRPCMetadata(wire.Bytes())
	wire.Free()
	if err != nil {
		return nil, err
	}
	m := &oip.ModelMetadata{Name: res.GetName()}
	for _, t := range res.GetInputs() {
		m.Inputs = append(m.Inputs, oip.TensorMetadata{Name: t.GetName(), Datatype: t.GetDatatype(), Shape: t.GetShape()})
	}
	for _, t := range res.GetOutputs() {
		m.Outputs = append(m.Outputs, oip.TensorMetadata{Name: t.GetName(), Datatype: t.GetDatatype(), Shape: t.GetShape()})
	}
	return m, nil
}
