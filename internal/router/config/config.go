// Package config is the router's configuration: the JSON document the operator writes for a
// Pipeline's router and the router reads with --config (docs/router.md), its defaults and its
// validation. The operator imports this package and stopwhen, nothing else of the router.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/stopwhen"
)

const (
	// DefaultMaxBodyBytes is the largest request or step response body when maxBodyBytes is
	// not set: 64 MiB.
	DefaultMaxBodyBytes int64 = 64 << 20
	// DefaultTimeoutSeconds is a step's deadline per attempt when timeoutSeconds is not set.
	DefaultTimeoutSeconds = 30
	// MaxTimeoutSeconds is the longest deadline a step may have.
	MaxTimeoutSeconds = 3600
	// MaxRequestTimeoutSeconds is the longest deadline a request through the pipeline may have.
	MaxRequestTimeoutSeconds = 86400
	// MaxRetries is the most retries a step may have.
	MaxRetries = 10
	// MaxSteps is the most steps a pipeline may have.
	MaxSteps = 64
	// MaxStepNameLength is the longest step name.
	MaxStepNameLength = 63
	// MaxBackoff is the longest wait before a retry, before its random factor in [0.5, 1.5).
	MaxBackoff = 1 * time.Second
	// BodyReadTimeout is how long a caller may take to send a request, its body included.
	BodyReadTimeout = 2 * time.Minute
	// DefaultWriteTimeout bounds the writing of one answer when the router's --write-timeout
	// is 0.
	DefaultWriteTimeout = time.Minute
	// bufferedBodiesFactor sets the default maxBufferedBytes: this many bodies of maxBodyBytes.
	bufferedBodiesFactor = 4
	// DefaultMaxTensors is the most tensors an Open Inference Protocol request or answer may
	// list when maxTensors is not set: a model's inputs or outputs are a few, and a few hundred
	// for the largest language models that take their attention cache as tensors.
	DefaultMaxTensors = 1024
	// MaxMaxTensors is the largest maxTensors.
	MaxMaxTensors = 16384
	// DefaultMaxTensorRank is the most dimensions a tensor's shape may have when maxTensorRank
	// is not set: NumPy's bound before its version 2, so what the Python model servers hold.
	DefaultMaxTensorRank = 32
	// MaxMaxTensorRank is the largest maxTensorRank (NumPy's bound since its version 2).
	MaxMaxTensorRank = 64
)

// Config is the router's configuration: the JSON document given with --config.
type Config struct {
	// pipeline names the pipeline the router serves, as namespace/name; it appears in the logs.
	Pipeline string `json:"pipeline,omitempty"`
	// steps are called in this order; at least one.
	Steps []Step `json:"steps"`
	// propagateHeaders are request headers passed on to every step, in addition to
	// traceparent, tracestate, baggage and X-Request-Id.
	PropagateHeaders []string `json:"propagateHeaders,omitempty"`
	// maxBodyBytes is the largest request body, and the largest step response body, the router
	// accepts (DefaultMaxBodyBytes when 0).
	MaxBodyBytes int64 `json:"maxBodyBytes,omitempty"`
	// maxBufferedBytes bounds the bytes of bodies all requests in flight hold together
	// (4 × maxBodyBytes when 0). A request that would exceed it gets 503.
	MaxBufferedBytes int64 `json:"maxBufferedBytes,omitempty"`
	// requestTimeoutSeconds is the deadline of a request through the whole pipeline, retries
	// and their waits included, in seconds (when 0: what every step's attempts may take, see
	// RequestTimeout).
	RequestTimeoutSeconds float64 `json:"requestTimeoutSeconds,omitempty"`
	// maxTensors is the most tensors the router reads in an Open Inference Protocol request's
	// inputs or answer's outputs (DefaultMaxTensors when 0): a request with more is answered
	// 400, a step's answer with more is its failure.
	MaxTensors int `json:"maxTensors,omitempty"`
	// maxTensorRank is the most dimensions of a tensor's shape the router reads
	// (DefaultMaxTensorRank when 0), as maxTensors.
	MaxTensorRank int `json:"maxTensorRank,omitempty"`
	// outputs make the pipeline's answer of tensors of the steps' answers, in this order, once
	// every step has answered. Without outputs the answer is the last step's answer as it is.
	Outputs []TensorOutput `json:"outputs,omitempty"`
}

// TensorOutput is one tensor of the pipeline's answer.
type TensorOutput struct {
	// name is the tensor's name in the pipeline's answer.
	Name string `json:"name"`
	// step is the step whose answer has the tensor among its outputs.
	Step string `json:"step"`
	// tensor is the tensor's name in that answer.
	Tensor string `json:"tensor"`
}

// Step is one step of the pipeline as the router calls it.
type Step struct {
	// name identifies the step in responses, headers, logs and metrics; unique in the pipeline.
	Name string `json:"name"`
	// url is where the step is called (POST), an absolute http or https URL.
	URL string `json:"url"`
	// timeoutSeconds is the deadline of one call to the step, in seconds (fractions allowed;
	// DefaultTimeoutSeconds when 0).
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// retries is how many times a call that failed with a 5xx, a connection error or a timeout
	// is made again.
	Retries int `json:"retries"`
	// stopWhen is a CEL expression over response, status and headers: when it is true the
	// pipeline ends with this step's response.
	StopWhen string `json:"stopWhen,omitempty"`
	// idempotent tells whether the step may get the same request twice (true when absent).
	// When false, only an attempt that sent nothing (the connection was not made) is retried.
	Idempotent *bool `json:"idempotent,omitempty"`
	// protocol is ProtocolOpenInference for a step that speaks the Open Inference Protocol's
	// REST API, ProtocolOpenInferenceGRPC for one that speaks its gRPC service; empty for any
	// other HTTP server. Only such a step may have inputs, have its outputs mapped by a later
	// step, and have stopWhen read its tensors.
	Protocol string `json:"protocol,omitempty"`
	// model is the model a step of protocol ProtocolOpenInferenceGRPC names in its calls
	// (ModelInfer, ModelMetadata); required for such a step, and only for it.
	Model string `json:"model,omitempty"`
	// metadataURL is where the model metadata of an Open Inference Protocol step is read
	// (GET /v2/models/<name>): before it is ready, the router checks there every mapping to
	// or from the step. Required for such a step that has inputs or whose outputs a later
	// step maps.
	MetadataURL string `json:"metadataURL,omitempty"`
	// inputs make the step's request from tensors of the pipeline's request and of earlier
	// steps' answers, under the names the step's model expects. Without inputs the step gets
	// the previous step's answer (the pipeline's request for the first step) as it is.
	Inputs []TensorInput `json:"inputs,omitempty"`
	// outputs are the outputs of the step's model its request asks for (the request's
	// "outputs"): the model answers those alone. Only with inputs; without outputs the model
	// answers every output.
	Outputs []string `json:"outputs,omitempty"`
}

// The protocols of a step that speaks the Open Inference Protocol (KServe v2).
const (
	// ProtocolOpenInference is its REST API: url is where requests are posted
	// (/v2/models/<name>/infer).
	ProtocolOpenInference = "OpenInferenceProtocol"
	// ProtocolOpenInferenceGRPC is its gRPC service, inference.GRPCInferenceService, over
	// HTTP/2 without TLS: url is grpc://host:port, and the model's metadata is read with
	// ModelMetadata (the step has no metadataURL).
	ProtocolOpenInferenceGRPC = "OpenInferenceProtocolGRPC"
)

// OpenInference reports whether the step speaks the Open Inference Protocol, over REST or gRPC.
func (s Step) OpenInference() bool {
	return s.Protocol == ProtocolOpenInference || s.Protocol == ProtocolOpenInferenceGRPC
}

// GRPC reports whether the step is called over the Open Inference Protocol's gRPC service.
func (s Step) GRPC() bool { return s.Protocol == ProtocolOpenInferenceGRPC }

// HasMetadata reports whether the router reads the step's model metadata: its metadataURL, or
// ModelMetadata for a gRPC step.
func (s Step) HasMetadata() bool { return s.MetadataURL != "" || s.GRPC() }

// TensorInput is one input tensor of a step's request.
type TensorInput struct {
	// name is the input of the step's model that gets the tensor.
	Name string `json:"name"`
	// step is the earlier step whose answer has the tensor among its outputs; empty for an
	// input tensor of the pipeline's request.
	Step string `json:"step,omitempty"`
	// tensor is the tensor's name in that answer or request.
	Tensor string `json:"tensor"`
}

// IsIdempotent is idempotent with the default applied.
func (s Step) IsIdempotent() bool { return s.Idempotent == nil || *s.Idempotent }

// Timeout is the step's deadline per attempt, with the default applied.
func (s Step) Timeout() time.Duration {
	if s.TimeoutSeconds == 0 {
		return DefaultTimeoutSeconds * time.Second
	}
	return time.Duration(s.TimeoutSeconds * float64(time.Second))
}

// RequestTimeout is requestTimeoutSeconds with the default applied: when unset, what every
// step's attempts may take (timeoutSeconds × (retries + 1)) plus the longest backoff before
// each retry (1.5 s).
func (c Config) RequestTimeout() time.Duration {
	if c.RequestTimeoutSeconds > 0 {
		return time.Duration(c.RequestTimeoutSeconds * float64(time.Second))
	}
	var d time.Duration
	for _, s := range c.Steps {
		d += time.Duration(s.Retries+1)*s.Timeout() + time.Duration(s.Retries)*MaxBackoff*3/2
	}
	return d
}

// LongestRequest is the longest a request may take with the router's default limits:
// BodyReadTimeout to send its body, the request deadline (which starts once the body is read)
// and DefaultWriteTimeout to write its answer.
func (c Config) LongestRequest() time.Duration {
	return BodyReadTimeout + c.RequestTimeout() + DefaultWriteTimeout
}

// BodyLimit is maxBodyBytes with the default applied.
func (c Config) BodyLimit() int64 {
	if c.MaxBodyBytes == 0 {
		return DefaultMaxBodyBytes
	}
	return c.MaxBodyBytes
}

// BufferLimit is maxBufferedBytes with the default applied.
func (c Config) BufferLimit() int64 {
	if c.MaxBufferedBytes == 0 {
		return bufferedBodiesFactor * c.BodyLimit()
	}
	return c.MaxBufferedBytes
}

// TensorLimit is maxTensors with the default applied.
func (c Config) TensorLimit() int {
	if c.MaxTensors == 0 {
		return DefaultMaxTensors
	}
	return c.MaxTensors
}

// RankLimit is maxTensorRank with the default applied.
func (c Config) RankLimit() int {
	if c.MaxTensorRank == 0 {
		return DefaultMaxTensorRank
	}
	return c.MaxTensorRank
}

// LoadConfig reads and validates the configuration in file.
func LoadConfig(file string) (Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Config{}, fmt.Errorf("read router config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("router config %s: %w", file, err)
	}
	return cfg, nil
}

// ParseConfig decodes a configuration (unknown fields are refused) and validates it.
func ParseConfig(data []byte) (Config, error) {
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return Config{}, errors.New("decode: more than one JSON document")
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate reports every problem of the configuration, stopWhen compile errors included.
func (c Config) Validate() error {
	var errs []error
	if len(c.Steps) == 0 {
		errs = append(errs, errors.New("steps: at least one step is required"))
	}
	if len(c.Steps) > MaxSteps {
		errs = append(errs, fmt.Errorf("steps: at most %d steps, got %d", MaxSteps, len(c.Steps)))
	}
	seen := make(map[string]int, len(c.Steps))
	for i, s := range c.Steps {
		if err := s.validate(); err != nil {
			errs = append(errs, fmt.Errorf("steps[%d]: %w", i, err))
		}
		for j, in := range s.Inputs {
			if err := c.validateSource(in.Step, seen, "an earlier step"); err != nil {
				errs = append(errs, fmt.Errorf("steps[%d].inputs[%d].step: %w", i, j, err))
			} else if err := c.askedFor(in.Step, in.Tensor, seen); err != nil {
				errs = append(errs, fmt.Errorf("steps[%d].inputs[%d].tensor: %w", i, j, err))
			}
		}
		if _, ok := seen[s.Name]; ok {
			errs = append(errs, fmt.Errorf("steps[%d].name: %q is used by an earlier step", i, s.Name))
		} else {
			seen[s.Name] = i
		}
	}
	errs = append(errs, c.validateOutputs(seen)...)
	for i, h := range c.PropagateHeaders {
		if err := CheckPropagatedHeader(h); err != nil {
			errs = append(errs, fmt.Errorf("propagateHeaders[%d]: %w", i, err))
		}
	}
	errs = append(errs, c.validateLimits()...)
	return errors.Join(errs...)
}

func (s Step) validate() error {
	var errs []error
	switch {
	case s.Name == "":
		errs = append(errs, errors.New("name: required"))
	case len(s.Name) > MaxStepNameLength:
		errs = append(errs, fmt.Errorf("name: at most %d characters", MaxStepNameLength))
	}
	if err := validateStepURL(s.URL, s.GRPC()); err != nil {
		errs = append(errs, fmt.Errorf("url: %w", err))
	}
	if s.TimeoutSeconds < 0 || s.TimeoutSeconds > MaxTimeoutSeconds {
		errs = append(errs, fmt.Errorf("timeoutSeconds: must be between 0 and %d, got %g", MaxTimeoutSeconds, s.TimeoutSeconds))
	}
	if s.Retries < 0 || s.Retries > MaxRetries {
		errs = append(errs, fmt.Errorf("retries: must be between 0 and %d, got %d", MaxRetries, s.Retries))
	}
	if s.StopWhen != "" {
		sw, err := stopwhen.Compile(s.StopWhen)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("stopWhen: %w", err))
		case sw.ReadsTensors() && !s.OpenInference():
			errs = append(errs, fmt.Errorf("stopWhen: reads tensors, which only the answer of a step of protocol %s or %s has",
				ProtocolOpenInference, ProtocolOpenInferenceGRPC))
		}
	}
	return errors.Join(append(errs, s.validateTensors())...)
}

// validateTensors checks what the step says of the Open Inference Protocol.
func (s Step) validateTensors() error {
	var errs []error
	switch s.Protocol {
	case "", ProtocolOpenInference, ProtocolOpenInferenceGRPC:
	default:
		errs = append(errs, fmt.Errorf("protocol: %q is neither %q nor %q", s.Protocol, ProtocolOpenInference, ProtocolOpenInferenceGRPC))
	}
	switch {
	case s.GRPC() && s.Model == "":
		errs = append(errs, fmt.Errorf("model: required for a step of protocol %s", ProtocolOpenInferenceGRPC))
	case !s.GRPC() && s.Model != "":
		errs = append(errs, fmt.Errorf("model: only a step of protocol %s names its model", ProtocolOpenInferenceGRPC))
	}
	if s.MetadataURL != "" {
		if s.Protocol != ProtocolOpenInference {
			errs = append(errs, fmt.Errorf("metadataURL: only a step of protocol %s has a metadataURL", ProtocolOpenInference))
		}
		if err := validateStepURL(s.MetadataURL, false); err != nil {
			errs = append(errs, fmt.Errorf("metadataURL: %w", err))
		}
	}
	if len(s.Inputs) > 0 && !s.HasMetadata() {
		errs = append(errs, fmt.Errorf("inputs: only a step of protocol %s with a metadataURL, or of protocol %s, has mapped inputs",
			ProtocolOpenInference, ProtocolOpenInferenceGRPC))
	}
	if len(s.Outputs) > 0 && len(s.Inputs) == 0 {
		errs = append(errs, errors.New("outputs: only a step with mapped inputs asks for outputs"))
	}
	asked := make(map[string]bool, len(s.Outputs))
	for j, name := range s.Outputs {
		switch {
		case name == "":
			errs = append(errs, fmt.Errorf("outputs[%d]: empty", j))
		case asked[name]:
			errs = append(errs, fmt.Errorf("outputs[%d]: %q is asked for twice", j, name))
		}
		asked[name] = true
	}
	names := make(map[string]bool, len(s.Inputs))
	for j, in := range s.Inputs {
		if in.Name == "" {
			errs = append(errs, fmt.Errorf("inputs[%d].name: required", j))
		} else if names[in.Name] {
			errs = append(errs, fmt.Errorf("inputs[%d].name: %q is mapped twice", j, in.Name))
		}
		names[in.Name] = true
		if in.Tensor == "" {
			errs = append(errs, fmt.Errorf("inputs[%d].tensor: required", j))
		}
	}
	return errors.Join(errs...)
}

// validateSource checks that step is empty (the pipeline's request) or names a step among
// known (by name, notKnown saying what it is not otherwise) that has model metadata to check its
// outputs against.
func (c Config) validateSource(step string, known map[string]int, notKnown string) error {
	if step == "" {
		return nil
	}
	i, ok := known[step]
	switch {
	case !ok:
		return fmt.Errorf("%q is not %s", step, notKnown)
	case !c.Steps[i].HasMetadata():
		return fmt.Errorf("step %q has no model metadata: only the outputs of a step of protocol %s with a metadataURL, or of protocol %s, are mapped",
			step, ProtocolOpenInference, ProtocolOpenInferenceGRPC)
	}
	return nil
}

// validateLimits checks the deadline and the bounds of bodies and tensors.
func (c Config) validateLimits() []error {
	var errs []error
	if c.RequestTimeoutSeconds < 0 || c.RequestTimeoutSeconds > MaxRequestTimeoutSeconds {
		errs = append(errs, fmt.Errorf("requestTimeoutSeconds: must be between 0 and %d, got %g",
			MaxRequestTimeoutSeconds, c.RequestTimeoutSeconds))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("maxBodyBytes: must not be negative, got %d", c.MaxBodyBytes))
	}
	if c.MaxTensors < 0 || c.MaxTensors > MaxMaxTensors {
		errs = append(errs, fmt.Errorf("maxTensors: must be between 0 and %d, got %d", MaxMaxTensors, c.MaxTensors))
	}
	if c.MaxTensorRank < 0 || c.MaxTensorRank > MaxMaxTensorRank {
		errs = append(errs, fmt.Errorf("maxTensorRank: must be between 0 and %d, got %d", MaxMaxTensorRank, c.MaxTensorRank))
	}
	if c.MaxBufferedBytes < 0 {
		errs = append(errs, fmt.Errorf("maxBufferedBytes: must not be negative, got %d", c.MaxBufferedBytes))
	} else if c.MaxBodyBytes >= 0 && c.BufferLimit() < 2*c.BodyLimit() {
		errs = append(errs, fmt.Errorf("maxBufferedBytes: must be at least twice maxBodyBytes (%d), got %d",
			2*c.BodyLimit(), c.MaxBufferedBytes))
	}
	return errs
}

// validateOutputs checks the tensors of the pipeline's answer, of the steps named in steps.
func (c Config) validateOutputs(steps map[string]int) []error {
	var errs []error
	names := make(map[string]bool, len(c.Outputs))
	for j, out := range c.Outputs {
		switch {
		case out.Name == "":
			errs = append(errs, fmt.Errorf("outputs[%d].name: required", j))
		case names[out.Name]:
			errs = append(errs, fmt.Errorf("outputs[%d].name: %q is in the answer twice", j, out.Name))
		}
		names[out.Name] = true
		if out.Tensor == "" {
			errs = append(errs, fmt.Errorf("outputs[%d].tensor: required", j))
		}
		if out.Step == "" {
			errs = append(errs, fmt.Errorf("outputs[%d].step: required", j))
		} else if err := c.validateSource(out.Step, steps, "a step"); err != nil {
			errs = append(errs, fmt.Errorf("outputs[%d].step: %w", j, err))
		} else if err := c.askedFor(out.Step, out.Tensor, steps); err != nil {
			errs = append(errs, fmt.Errorf("outputs[%d].tensor: %w", j, err))
		}
	}
	return errs
}

// askedFor checks that the answer of step (empty: the pipeline's request; among known, by
// name) can have tensor: a step whose request names its outputs gets those alone.
func (c Config) askedFor(step, tensor string, known map[string]int) error {
	if step == "" {
		return nil
	}
	asked := c.Steps[known[step]].Outputs
	if len(asked) == 0 || slices.Contains(asked, tensor) {
		return nil
	}
	return fmt.Errorf("step %q asks its model only for the outputs %s", step, strings.Join(asked, ", "))
}

// validateStepURL checks a step's URL: http or https, or grpc://host:port for a gRPC step.
func validateStepURL(raw string, grpc bool) error {
	if raw == "" {
		return errors.New("required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Not url.Parse's error itself: it quotes the URL whole, credentials included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("not a URL: %w", err)
	}
	if u.User != nil {
		// Credentials in the URL would be written to the logs and sent with every call; a
		// step that needs them is passed the caller's header (propagateHeaders).
		return fmt.Errorf("%s://%s: credentials (user:password@) are not allowed in a step URL", u.Scheme, u.Host)
	}
	switch {
	case grpc && u.Scheme != "grpc":
		return fmt.Errorf("%q: the scheme of a step of protocol %s must be grpc", raw, ProtocolOpenInferenceGRPC)
	case grpc && (u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != ""):
		return fmt.Errorf("%q: a gRPC step's URL is grpc://host:port, with no path or query", raw)
	case !grpc && u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: the scheme must be http or https", raw)
	}
	if u.Host == "" {
		return fmt.Errorf("%q: a host is required", raw)
	}
	return nil
}

// CheckPropagatedHeader reports why name cannot be in propagateHeaders: it is not an HTTP
// header name, the router sets that header itself, or it belongs to one connection.
func CheckPropagatedHeader(name string) error {
	switch {
	case !validHeaderName(name):
		return fmt.Errorf("%q is not a header name", name)
	case HopByHopHeader(http.CanonicalHeaderKey(name)):
		return fmt.Errorf("%q belongs to one connection: the router never passes it on", name)
	case reservedHeader(name):
		return fmt.Errorf("%q is set by the router itself", name)
	}
	return nil
}

// validHeaderName reports whether name is an HTTP field name (an RFC 9110 token).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if c >= 0x7f || c <= ' ' || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

const (
	// HeaderRequestID carries the request's identifier to every step and back to the caller.
	HeaderRequestID = "X-Request-Id"
	// HeaderLastStep names, in the router's answer, the step whose response it is.
	HeaderLastStep = "X-Pipeline-Last-Step"
	// HeaderStep names, on each call to a step, the step called: what the step, or a proxy in
	// front of it, logs or traces of the call names the branch it serves.
	HeaderStep = "X-Pipeline-Step"
)

// reservedHeader reports whether the router sets the header itself, or drops it on every call
// to a step, so that propagating it from the caller would be wrong or silently do nothing.
func reservedHeader(name string) bool {
	switch name = http.CanonicalHeaderKey(name); name {
	case HeaderRequestID, HeaderLastStep, HeaderStep:
		return true
	}
	return FramingHeader(name)
}

// FramingHeader reports whether the field of canonical name is one the router writes itself on
// every call to a step, whatever the caller sent: those that frame a message (Host,
// Content-Length, Expect), those that describe the body it sends (Content-Type,
// Content-Encoding, and the Open Inference Protocol's Inference-Header-Content-Length), and the
// hop-by-hop ones.
func FramingHeader(name string) bool {
	switch name {
	case "Host", "Content-Length", "Expect", "Content-Type", "Content-Encoding", "Inference-Header-Content-Length":
		return true
	}
	return HopByHopHeader(name)
}

// HopByHopHeader reports whether the field of canonical name belongs to one connection and is
// never passed on, in a request or an answer: those of RFC 9110 section 7.6.1 (Connection,
// Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade) and every Proxy-* field.
func HopByHopHeader(name string) bool {
	switch name {
	case "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return strings.HasPrefix(name, "Proxy-")
}
