package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
	"github.com/ndsl-cn/pipeline-operator/internal/router/celjson"
	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
	"github.com/ndsl-cn/pipeline-operator/internal/router/stepclient"
	"github.com/ndsl-cn/pipeline-operator/internal/router/stopwhen"
)

// Backoff before retry n (0 for the first retry): baseBackoff doubled each retry, at most
// config.MaxBackoff, times a random factor in [0.5, 1.5).
const (
	baseBackoff = 25 * time.Millisecond
	// drainBytes is how much of an unread response is read away to keep its connection.
	drainBytes = 64 << 10
)

// step is a configured step with its compiled stopWhen and its metrics.
type step struct {
	name  string
	index int // 1-based position in the pipeline
	// url names the step in the log; target is that URL parsed once, where the client calls it.
	url     string
	target  stepclient.Target
	timeout time.Duration
	retries int
	// idempotent is false for a step that must not get a request twice: only attempts that
	// sent nothing are made again.
	idempotent bool
	budget     *retryBudget
	stopWhen   *stopwhen.Expr
	metrics    stepMetrics
	// openInference is true for a step that speaks the Open Inference Protocol (REST or gRPC).
	openInference bool
	// grpc is how a step of the protocol's gRPC service is called; nil for a REST step.
	grpc *grpcStep
	// metadataURL is where its model's metadata is read; model is that metadata once read
	// (nil before: its inputs are then not checked against it).
	metadataURL string
	model       atomic.Pointer[oip.ModelMetadata]
	// inputs are its mapped inputs: its request is made of them. nil: it gets the previous
	// step's answer.
	inputs []input
	// outputs are the outputs of its model its request asks for; nil: every output.
	outputs []string
}

// payload is a body on its way to a step, or back from one.
type payload struct {
	body        *bodies.Buffer
	contentType string
	// contentEncoding is the body's Content-Encoding, passed on with it (the router neither
	// decodes nor encodes bodies).
	contentEncoding string
	// inferenceHeader is the body's Inference-Header-Content-Length (the Open Inference
	// Protocol's binary data extension), passed on with it.
	inferenceHeader string
}

// forStep is p as the client to the steps sends it.
func (p payload) forStep() stepclient.Payload {
	return stepclient.Payload{Body: p.body, ContentType: p.contentType, ContentEncoding: p.contentEncoding,
		InferenceHeader: p.inferenceHeader}
}

// stepResponse is what a step answered: a 2xx or a 4xx (which is passed back, not retried).
type stepResponse struct {
	payload
	status int
	header http.Header
}

// failure is a step call that failed for good: the router answers with status and message,
// and logs err.
type failure struct {
	step   string
	index  int
	url    string
	reason string
	status int
	// message says what happened in the router's own words, for the caller: it names the step
	// by its name and position, never its address, and quotes no expression.
	message string
	// err is the detail, addresses and expressions included: for the router's log only.
	err error
	// retryAfter is the step's Retry-After, passed back with a 503 the router gave up on.
	retryAfter string
}

// Error is the failure with its detail, for the router's log; the caller gets message.
func (f *failure) Error() string { return fmt.Sprintf("%s: %v", f.message, f.err) }

// attemptError is one failed attempt: why, and whether another attempt may succeed.
type attemptError struct {
	reason    string
	retryable bool
	// unsent is true when the request did not leave the router (the connection was not made):
	// even a step that is not idempotent may get it again.
	unsent bool
	// status is the step's answer, when it answered (5xx).
	status int
	// retryAfter is the Retry-After of a 503, raw.
	retryAfter string
	// what completes "step N (name) ..." for the caller, in fixed words.
	what string
	// err is the detail for the log.
	err error
}

// attempt makes one call to the step under its deadline and reads the response.
func (r *Router) attempt(ctx context.Context, s *step, header http.Header, in payload) (*stepResponse, *attemptError) {
	if s.grpc != nil {
		return r.attemptGRPC(ctx, s, header, in)
	}
	// The attempt ends at the step's timeout or at the request's deadline (ctx's), whichever
	// is first.
	res, err := r.client.Post(ctx, &s.target, s.timeout, header, in.forStep())
	if err != nil {
		if ctx.Err() == nil && stepclient.AnswerHeaderTooLarge(err) {
			return nil, &attemptError{reason: ReasonResponseTooLarge,
				what: fmt.Sprintf("answered a header over %d bytes", stepclient.MaxAnswerHeaderBytes),
				err:  fmt.Errorf("read the response of POST %s: %w", s.url, err)}
		}
		return nil, classify(ctx, err, s.timeout)
	}
	defer func() {
		// Drain what is left of a small body so that the connection can be used again; after a
		// 101 the connection is the step's other protocol, which the router does not wait for.
		if res.StatusCode != http.StatusSwitchingProtocols {
			_, _ = io.CopyN(io.Discard, res.Body, drainBytes)
		}
		_ = res.Body.Close()
	}()
	switch {
	case res.StatusCode >= 500:
		ae := &attemptError{reason: ReasonServerError, retryable: retryableStatus(res.StatusCode),
			status: res.StatusCode, what: "answered " + statusText(res.StatusCode),
			err: fmt.Errorf("POST %s answered %s", s.url, res.Status)}
		if res.StatusCode == http.StatusServiceUnavailable {
			ae.retryAfter = res.Header.Get("Retry-After")
		}
		return nil, ae
	case res.StatusCode < 200 || (res.StatusCode >= 300 && res.StatusCode < 400):
		return nil, &attemptError{reason: ReasonUnexpectedStatus,
			what: "answered " + statusText(res.StatusCode) + ", which is neither a success nor a client error",
			err:  fmt.Errorf("POST %s answered %s (Location %q)", s.url, res.Status, res.Header.Get("Location"))}
	}
	body, err := bodies.Read(res.Body, res.ContentLength, r.bodyLimit, r.budget)
	switch {
	case errors.Is(err, bodies.ErrTooLarge):
		return nil, &attemptError{reason: ReasonResponseTooLarge,
			what: fmt.Sprintf("answered more than maxBodyBytes (%d bytes)", r.bodyLimit),
			err:  fmt.Errorf("read the response of POST %s: %w", s.url, err)}
	case errors.Is(err, bodies.ErrBudgetExceeded):
		return nil, &attemptError{reason: ReasonBufferBudget,
			what: "answered while the router holds maxBufferedBytes of bodies already",
			err:  fmt.Errorf("read the response of POST %s: %w", s.url, err)}
	case err != nil:
		return nil, classify(ctx, fmt.Errorf("read the response of POST %s: %w", s.url, err), s.timeout)
	}
	return &stepResponse{
		payload: payload{body: body, contentType: res.Header.Get("Content-Type"), contentEncoding: res.Header.Get("Content-Encoding"),
			inferenceHeader: res.Header.Get(oip.HeaderInferenceHeaderLength)},
		status: res.StatusCode,
		header: res.Header,
	}, nil
}

// classify tells a timeout, the request's deadline, a caller gone away and the kinds of
// connection error apart. err keeps the detail (the step's address) for the log.
func classify(ctx context.Context, err error, timeout time.Duration) *attemptError {
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errRequestDeadline):
			return &attemptError{reason: ReasonTimeout, what: "timed out: the request's deadline passed",
				err: fmt.Errorf("%w: %w", cause, err)}
		case errors.Is(cause, errRequestEnded):
			return &attemptError{reason: ReasonCanceled, what: "was cancelled: another step ended the request",
				err: fmt.Errorf("%w: %w", cause, err)}
		}
		return &attemptError{reason: ReasonCanceled, what: "was abandoned: the caller went away",
			err: fmt.Errorf("the caller went away: %w", context.Cause(ctx))}
	}
	unsent := isDialError(err)
	var nerr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &nerr) && nerr.Timeout()) {
		return &attemptError{reason: ReasonTimeout, retryable: true, unsent: unsent, what: "timed out after " + timeout.String(),
			err: fmt.Errorf("no response within timeoutSeconds (%s): %w", timeout, err)}
	}
	return &attemptError{reason: ReasonConnection, retryable: true, unsent: unsent, what: connectionTrouble(err), err: err}
}

// isDialError reports whether err happened while connecting (refused, name not resolved, no
// route, connect timeout): nothing of the request was sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// connectionTrouble says in fixed words what went wrong with the connection to a step.
func connectionTrouble(err error) string {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused the connection"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed the connection before its response was complete"
	case errors.As(err, &dnsErr):
		return "could not be reached: its name did not resolve"
	default:
		return "could not be reached"
	}
}

// statusText is an HTTP status as the router reports it: the code and its standard text, never
// the reason phrase the step sent.
func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return strconv.Itoa(code) + " " + t
	}
	return strconv.Itoa(code)
}

// label names the step for the caller: its position (from 1) and its name.
func (s *step) label() string { return fmt.Sprintf("step %d (%s)", s.index, s.name) }

func (s *step) fail(reason, message string, err error) *failure {
	status := http.StatusBadGateway
	switch reason {
	case ReasonTimeout:
		status = http.StatusGatewayTimeout
	case ReasonBufferBudget:
		status = http.StatusServiceUnavailable
	case ReasonCanceled:
		status = statusClientClosedRequest
	case ReasonBadRequest:
		status = http.StatusBadRequest
	}
	return &failure{step: s.name, index: s.index, url: s.url, reason: reason, status: status, message: message, err: err}
}

// stops evaluates the step's stopWhen on its response. A JSON answer the expression reads is
// joined into one slice (the copy counted in the answer's budget) and read as the expression
// reads it (jsonValue); what decoding it whole would hold is charged against rd's budget while
// it is evaluated, as is what reading and decoding an answer's tensors hold (decodeTensors).
func (s *step) stops(ctx context.Context, resp *stepResponse, rd oip.Reader) (bool, *failure) {
	if s.stopWhen == nil {
		return false, nil
	}
	bg := rd.Budget
	var response any
	if s.stopWhen.ReadsResponse() && isJSON(resp.contentType) {
		budgetFull := func(err error) (bool, *failure) {
			return false, s.budgetFull("the stopWhen condition of "+s.label()+" could not be evaluated", err)
		}
		// The answer is read from one slice: a body of several blocks is joined first.
		if err := resp.body.Join(); err != nil {
			return budgetFull(fmt.Errorf("join the response of POST %s (%d bytes) for stopWhen: %w", s.url, resp.body.Len(), err))
		}
		cost := celjson.DecodeCost(resp.body.Bytes())
		if !bg.TryAcquire(cost) {
			return budgetFull(fmt.Errorf("decode the response of POST %s for stopWhen (about %d bytes): %w", s.url, cost, bodies.ErrBudgetExceeded))
		}
		defer bg.Release(cost)
		if v := celjson.Value(resp.body.Bytes()); v != nil {
			response = v
		}
	}
	var tensors map[string][]any
	if s.stopWhen.ReadsTensors() && s.openInference {
		var (
			f    *failure
			cost int64
		)
		if tensors, cost, f = s.decodeTensors(resp, rd); f != nil {
			return false, f
		}
		defer bg.Release(cost)
	}
	stop, err := s.stopWhen.Eval(ctx, stopwhen.Input{
		Response: response,
		Tensors:  tensors,
		Status:   resp.status,
		Header:   resp.header,
	})
	if err != nil && ctx.Err() != nil {
		// Interrupted: the caller went away or the request's deadline passed, not the expression.
		return false, s.ended(ctx)
	}
	if err != nil {
		s.metrics.failed(ReasonStopWhen)
		return false, s.fail(ReasonStopWhen, "the stopWhen condition of "+s.label()+" could not be evaluated",
			fmt.Errorf("evaluate stopWhen %q on the response of POST %s: %w", s.stopWhen, s.url, err))
	}
	return stop, nil
}

// isJSON reports whether contentType is JSON: application/json or anything+json.
func isJSON(contentType string) bool {
	if contentType == "application/json" {
		// The usual answer, without parsing parameters into a map.
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// defaultBackoff is the jittered exponential backoff before retry n.
func defaultBackoff(n int) time.Duration {
	d := min(baseBackoff<<min(n, 10), config.MaxBackoff)
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}
