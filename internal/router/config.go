package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
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
	// bufferedBodiesFactor sets the default maxBufferedBytes: this many bodies of maxBodyBytes.
	bufferedBodiesFactor = 4
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
		d += time.Duration(s.Retries+1)*s.Timeout() + time.Duration(s.Retries)*maxBackoff*3/2
	}
	return d
}

// LongestRequest is the longest a request may take with the router's default limits:
// bodyReadTimeout to send its body, the request deadline (which starts once the body is read)
// and DefaultWriteTimeout to write its answer.
func (c Config) LongestRequest() time.Duration {
	return bodyReadTimeout + c.RequestTimeout() + DefaultWriteTimeout
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
	seen := make(map[string]bool, len(c.Steps))
	for i, s := range c.Steps {
		if err := s.validate(); err != nil {
			errs = append(errs, fmt.Errorf("steps[%d]: %w", i, err))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("steps[%d].name: %q is used by an earlier step", i, s.Name))
		}
		seen[s.Name] = true
	}
	for i, h := range c.PropagateHeaders {
		if err := CheckPropagatedHeader(h); err != nil {
			errs = append(errs, fmt.Errorf("propagateHeaders[%d]: %w", i, err))
		}
	}
	if c.RequestTimeoutSeconds < 0 || c.RequestTimeoutSeconds > MaxRequestTimeoutSeconds {
		errs = append(errs, fmt.Errorf("requestTimeoutSeconds: must be between 0 and %d, got %g",
			MaxRequestTimeoutSeconds, c.RequestTimeoutSeconds))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("maxBodyBytes: must not be negative, got %d", c.MaxBodyBytes))
	}
	if c.MaxBufferedBytes < 0 {
		errs = append(errs, fmt.Errorf("maxBufferedBytes: must not be negative, got %d", c.MaxBufferedBytes))
	} else if c.MaxBodyBytes >= 0 && c.BufferLimit() < 2*c.BodyLimit() {
		errs = append(errs, fmt.Errorf("maxBufferedBytes: must be at least twice maxBodyBytes (%d), got %d",
			2*c.BodyLimit(), c.MaxBufferedBytes))
	}
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
	if err := validateStepURL(s.URL); err != nil {
		errs = append(errs, fmt.Errorf("url: %w", err))
	}
	if s.TimeoutSeconds < 0 || s.TimeoutSeconds > MaxTimeoutSeconds {
		errs = append(errs, fmt.Errorf("timeoutSeconds: must be between 0 and %d, got %g", MaxTimeoutSeconds, s.TimeoutSeconds))
	}
	if s.Retries < 0 || s.Retries > MaxRetries {
		errs = append(errs, fmt.Errorf("retries: must be between 0 and %d, got %d", MaxRetries, s.Retries))
	}
	if s.StopWhen != "" {
		if _, err := CompileStopWhen(s.StopWhen); err != nil {
			errs = append(errs, fmt.Errorf("stopWhen: %w", err))
		}
	}
	return errors.Join(errs...)
}

func validateStepURL(raw string) error {
	if raw == "" {
		return errors.New("required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: the scheme must be http or https", raw)
	}
	if u.Host == "" {
		return fmt.Errorf("%q: a host is required", raw)
	}
	return nil
}

// CheckPropagatedHeader reports why name cannot be in propagateHeaders: it is not an HTTP
// header name, or the router sets that header itself.
func CheckPropagatedHeader(name string) error {
	switch {
	case !validHeaderName(name):
		return fmt.Errorf("%q is not a header name", name)
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
