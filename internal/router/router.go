package router

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
	"github.com/ndsl-cn/pipeline-operator/internal/router/stepclient"
	"github.com/ndsl-cn/pipeline-operator/internal/router/stopwhen"
)

// statusClientClosedRequest is counted (never sent: nobody listens) for a caller that went
// away before its answer.
const statusClientClosedRequest = 499

// Options are the router's seams; the zero value is what the binary uses.
type Options struct {
	// Logger receives the router's logs (slog.Default() when nil).
	Logger *slog.Logger
	// Registerer receives the router's metrics (a new registry when nil: see Router.Gatherer).
	Registerer prometheus.Registerer
	// Backoff is the wait before retry n, counted from 0 (jittered exponential when nil).
	Backoff func(n int) time.Duration
	// Clock is the time of day for the retry budgets and Retry-After dates (time.Now when nil).
	Clock func() time.Time
	// RetryBudget bounds each step's retries (DefaultRetryBudget() when nil).
	RetryBudget *RetryBudget
}

// Router carries requests through the steps of a pipeline; it is an http.Handler.
type Router struct {
	pipeline  string
	steps     []*step
	propagate []string
	bodyLimit int64
	budget    *bodies.Budget
	client    *stepclient.Client
	metrics   *metrics
	gatherer  prometheus.Gatherer
	log       *slog.Logger
	backoff   func(int) time.Duration
	now       func() time.Time
	// requestTimeout is the deadline of a request through the whole pipeline.
	requestTimeout time.Duration
	// graph is what each step waits for and which bodies steps read.
	graph *graph
	// outputs make the pipeline's answer, when there are; modelName is the model the answer
	// names: the Pipeline's name.
	outputs   []output
	modelName string
	// reader reads the tensors of Open Inference Protocol bodies within the configuration's
	// bounds, charging budget.
	reader oip.Reader
}

// New validates cfg, compiles its stopWhen expressions and makes the router.
func New(cfg config.Config, opts Options) (*Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Router{
		pipeline:  cfg.Pipeline,
		propagate: propagatedHeaderNames(cfg.PropagateHeaders),
		bodyLimit: cfg.BodyLimit(),
		budget:    bodies.NewBudget(cfg.BufferLimit()),
		log:       opts.Logger,
		backoff:   opts.Backoff,
		now:       opts.Clock,

		requestTimeout: cfg.RequestTimeout(),
	}
	r.reader = oip.Reader{MaxTensors: cfg.TensorLimit(), MaxRank: cfg.RankLimit(), Budget: r.budget}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.backoff == nil {
		r.backoff = defaultBackoff
	}
	reg := opts.Registerer
	if reg == nil {
		pr := prometheus.NewRegistry()
		pr.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg, r.gatherer = pr, pr
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register router metrics: %w", err)
	}
	r.metrics = m
	r.client = stepclient.New(nil)
	if opts.RetryBudget != nil {
		if err := opts.RetryBudget.Validate(); err != nil {
			return nil, err
		}
	}
	for i, s := range cfg.Steps {
		t, err := stepclient.NewTarget(s.URL)
		if err != nil {
			return nil, fmt.Errorf("step %q url: %w", s.Name, err)
		}
		st := &step{name: s.Name, index: i + 1, url: s.URL, target: t, timeout: s.Timeout(), retries: s.Retries,
			idempotent: s.IsIdempotent(), budget: newStepRetryBudget(r.now, opts.RetryBudget), metrics: m.forStep(s.Name)}
		if s.StopWhen != "" {
			if st.stopWhen, err = stopwhen.Compile(s.StopWhen); err != nil {
				return nil, fmt.Errorf("step %q stopWhen: %w", s.Name, err)
			}
		}
		st.openInference, st.metadataURL, st.outputs = s.OpenInference(), s.MetadataURL, s.Outputs
		if s.GRPC() {
			if st.grpc, err = newGRPCStep(s.URL, s.Model, r.bodyLimit, s.Timeout(), r.now); err != nil {
				return nil, fmt.Errorf("step %q url: %w", s.Name, err)
			}
		}
		for _, in := range s.Inputs {
			source := 0
			if in.Step != "" {
				source = slices.IndexFunc(r.steps, func(e *step) bool { return e.name == in.Step }) + 1
			}
			st.inputs = append(st.inputs, input{name: in.Name, source: source, tensor: in.Tensor})
		}
		r.steps = append(r.steps, st)
	}
	for _, out := range cfg.Outputs {
		source := slices.IndexFunc(r.steps, func(e *step) bool { return e.name == out.Step }) + 1
		r.outputs = append(r.outputs, output{name: out.Name, source: source, tensor: out.Tensor})
	}
	r.modelName = cfg.Pipeline[strings.LastIndexByte(cfg.Pipeline, '/')+1:]
	r.graph = newGraph(r.steps, r.outputs)
	return r, nil
}

// Gatherer is the registry the router's metrics are in when Options.Registerer was nil.
func (r *Router) Gatherer() prometheus.Gatherer { return r.gatherer }

// ServeHTTP runs one request through the pipeline.
func (r *Router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	id := requestID(req.Header)
	w.Header()[config.HeaderRequestID] = []string{id}
	code := r.serve(w, req, id)
	r.metrics.answered(code, start)
	if code == statusClientClosedRequest {
		// Nobody listens: the connection ends without an answer, where the server would
		// otherwise send an empty 200 on it.
		panic(http.ErrAbortHandler)
	}
}

func (r *Router) serve(w http.ResponseWriter, req *http.Request, id string) int {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return writeError(w, http.StatusMethodNotAllowed, errorBody{Error: "the pipeline is called with POST", RequestID: id})
	}
	body, err := bodies.Read(req.Body, req.ContentLength, r.bodyLimit, r.budget)
	switch {
	case errors.Is(err, bodies.ErrTooLarge):
		return writeError(w, http.StatusRequestEntityTooLarge, errorBody{
			Error: fmt.Sprintf("the request body exceeds maxBodyBytes (%d)", r.bodyLimit), RequestID: id})
	case errors.Is(err, bodies.ErrBudgetExceeded):
		return writeError(w, http.StatusServiceUnavailable, errorBody{Error: bodies.ErrBudgetExceeded.Error(), RequestID: id})
	case errors.Is(err, errBodyTooSlow):
		r.log.Warn("pipeline request refused", "pipeline", r.pipeline, "status", http.StatusRequestTimeout,
			"requestID", id, "error", fmt.Errorf("read the request body: %w", err))
		return writeError(w, http.StatusRequestTimeout, errorBody{Error: errBodyTooSlow.Error(), RequestID: id})
	case err != nil:
		if req.Context().Err() != nil {
			return statusClientClosedRequest
		}
		// The read error may name the router's and the caller's addresses: it goes to the log.
		r.log.Warn("pipeline request refused", "pipeline", r.pipeline, "status", http.StatusBadRequest,
			"requestID", id, "error", fmt.Errorf("read the request body: %w", err))
		return writeError(w, http.StatusBadRequest, errorBody{Error: "the request body could not be read", RequestID: id})
	}
	ctx, cancel := context.WithTimeoutCause(req.Context(), r.requestTimeout, errRequestDeadline)
	defer cancel()
	resp, last, f := r.run(ctx, stepHeaders(req.Header, r.propagate, id),
		payload{body: body, contentType: req.Header.Get("Content-Type"), contentEncoding: req.Header.Get("Content-Encoding"),
			inferenceHeader: req.Header.Get(oip.HeaderInferenceHeaderLength)})
	if f != nil {
		if f.status != statusClientClosedRequest {
			r.log.Warn("pipeline request failed", "pipeline", r.pipeline, "step", f.step, "stepIndex", f.index,
				"url", f.url, "reason", f.reason, "status", f.status, "requestID", id, "error", f.err)
		}
		return writeError(w, f.status, errorBody{Error: f.message, Step: f.step, StepIndex: f.index,
			Reason: f.reason, RequestID: id, retryAfter: f.retryAfter})
	}
	defer resp.body.Release()
	status := http.StatusOK
	if resp.status >= 400 {
		status = resp.status
	}
	h := w.Header()
	copyAnswerHeaders(h, resp.header)
	h[config.HeaderLastStep] = []string{last}
	// An empty Content-Type stays empty: the step's body is not sniffed.
	h["Content-Type"] = nil
	if resp.contentType != "" {
		h["Content-Type"] = []string{resp.contentType}
	}
	h["Content-Length"] = []string{strconv.FormatInt(resp.body.Len(), 10)}
	w.WriteHeader(status)
	_, _ = resp.body.WriteTo(w)
	return status
}

// errorBody is the JSON body of an answer the router makes itself. Every field is in the
// router's own words or the caller's: no step address, no stopWhen expression, no Go error
// (those go to the log, under the same request id).
type errorBody struct {
	// Error says what happened, e.g. "step 2 (recognise) timed out after 30s".
	Error string `json:"error"`
	// Step is the name of the step that failed, empty for errors that belong to no step.
	Step string `json:"step,omitempty"`
	// StepIndex is the position of that step, from 1.
	StepIndex int `json:"stepIndex,omitempty"`
	// Reason is the reason label of pipeline_router_step_errors_total for a step's failure.
	Reason string `json:"reason,omitempty"`
	// RequestID is the request's X-Request-Id, the caller's or the one the router made.
	RequestID string `json:"requestId"`
	// retryAfter is the Retry-After header of a 503 (1 when empty).
	retryAfter string
}

func writeError(w http.ResponseWriter, status int, e errorBody) int {
	if status == statusClientClosedRequest {
		return status
	}
	body, _ := json.Marshal(e)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	if e.Step != "" {
		h[config.HeaderLastStep] = []string{e.Step}
	}
	if status == http.StatusServiceUnavailable {
		h["Retry-After"] = []string{cmp.Or(e.retryAfter, "1")}
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return status
}
