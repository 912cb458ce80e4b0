package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"
)

// Backoff before retry n (0 for the first retry): baseBackoff doubled each retry, at most
// maxBackoff, times a random factor in [0.5, 1.5).
const (
	baseBackoff = 25 * time.Millisecond
	maxBackoff  = 1 * time.Second
	// drainBytes is how much of an unread response is read away to keep its connection.
	drainBytes = 64 << 10
)

// step is a configured step with its compiled stopWhen and its metrics.
type step struct {
	name     string
	url      string
	timeout  time.Duration
	retries  int
	stopWhen *StopWhen
	metrics  stepMetrics
}

// payload is a body on its way to a step, or back from one.
type payload struct {
	body        *buffer
	contentType string
}

// stepResponse is what a step answered: a 2xx or a 4xx (which is passed back, not retried).
type stepResponse struct {
	payload
	status int
	header http.Header
}

// failure is a step call that failed for good: the router answers with status and this body.
type failure struct {
	step   string
	reason string
	status int
	err    error
}

func (f *failure) Error() string { return fmt.Sprintf("step %q: %v", f.step, f.err) }

// attemptError is one failed attempt: why, and whether another attempt may succeed.
type attemptError struct {
	reason    string
	retryable bool
	err       error
}

// call calls the step with in, retrying what may succeed another time.
func (r *Router) call(ctx context.Context, s *step, header http.Header, in payload) (*stepResponse, *failure) {
	for attempt := 0; ; attempt++ {
		start := time.Now()
		resp, aerr := r.attempt(ctx, s, header, in)
		s.metrics.duration.Observe(time.Since(start).Seconds())
		if aerr == nil {
			if resp.status >= 400 {
				s.metrics.failed(ReasonClientError)
			}
			return resp, nil
		}
		s.metrics.failed(aerr.reason)
		if !aerr.retryable || attempt >= s.retries {
			return nil, s.fail(aerr.reason, aerr.err)
		}
		s.metrics.retries.Inc()
		t := time.NewTimer(r.backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			s.metrics.failed(ReasonCanceled)
			return nil, s.fail(ReasonCanceled, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// attempt makes one call to the step under its deadline and reads the response.
func (r *Router) attempt(ctx context.Context, s *step, header http.Header, in payload) (*stepResponse, *attemptError) {
	actx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, s.url, bytes.NewReader(in.body.Bytes()))
	if err != nil {
		return nil, &attemptError{reason: ReasonConnection, err: err}
	}
	req.Header = header.Clone()
	if in.contentType != "" {
		req.Header["Content-Type"] = []string{in.contentType}
	}
	res, err := r.client.Do(req)
	if err != nil {
		return nil, classify(ctx, err, s.timeout)
	}
	defer func() {
		// Drain what is left of a small body so that the connection can be used again.
		_, _ = io.CopyN(io.Discard, res.Body, drainBytes)
		_ = res.Body.Close()
	}()
	switch {
	case res.StatusCode >= 500:
		return nil, &attemptError{reason: ReasonServerError, retryable: true,
			err: fmt.Errorf("the step answered %s", res.Status)}
	case res.StatusCode < 200 || (res.StatusCode >= 300 && res.StatusCode < 400):
		return nil, &attemptError{reason: ReasonUnexpectedStatus,
			err: fmt.Errorf("the step answered %s", res.Status)}
	}
	body, err := readBody(res.Body, res.ContentLength, r.bodyLimit, r.budget)
	switch {
	case errors.Is(err, errBodyTooLarge):
		return nil, &attemptError{reason: ReasonResponseTooLarge,
			err: fmt.Errorf("the step's response exceeds maxBodyBytes (%d)", r.bodyLimit)}
	case errors.Is(err, errBudgetExceeded):
		return nil, &attemptError{reason: ReasonBufferBudget, err: err}
	case err != nil:
		return nil, classify(ctx, fmt.Errorf("read the step's response: %w", err), s.timeout)
	}
	return &stepResponse{
		payload: payload{body: body, contentType: res.Header.Get("Content-Type")},
		status:  res.StatusCode,
		header:  res.Header,
	}, nil
}

// classify tells a timeout, a caller gone away and a connection error apart.
func classify(ctx context.Context, err error, timeout time.Duration) *attemptError {
	if ctx.Err() != nil {
		return &attemptError{reason: ReasonCanceled, err: fmt.Errorf("the caller went away: %w", context.Cause(ctx))}
	}
	var nerr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &nerr) && nerr.Timeout()) {
		return &attemptError{reason: ReasonTimeout, retryable: true,
			err: fmt.Errorf("no response within timeoutSeconds (%s)", timeout)}
	}
	return &attemptError{reason: ReasonConnection, retryable: true, err: err}
}

func (s *step) fail(reason string, err error) *failure {
	status := http.StatusBadGateway
	switch reason {
	case ReasonTimeout:
		status = http.StatusGatewayTimeout
	case ReasonBufferBudget:
		status = http.StatusServiceUnavailable
	case ReasonCanceled:
		status = statusClientClosedRequest
	}
	return &failure{step: s.name, reason: reason, status: status, err: err}
}

// stops evaluates the step's stopWhen on its response.
func (s *step) stops(ctx context.Context, resp *stepResponse) (bool, *failure) {
	if s.stopWhen == nil {
		return false, nil
	}
	stop, err := s.stopWhen.Eval(ctx, StopWhenInput{
		Response: decodeJSON(resp.contentType, resp.body.Bytes()),
		Status:   resp.status,
		Headers:  firstValues(resp.header),
	})
	if err != nil {
		s.metrics.failed(ReasonStopWhen)
		return false, s.fail(ReasonStopWhen, fmt.Errorf("stopWhen %q: %w", s.stopWhen, err))
	}
	return stop, nil
}

// decodeJSON is the body decoded when its content type is JSON (application/json or
// anything+json) and it parses; nil otherwise.
func decodeJSON(contentType string, body []byte) any {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	return v
}

// defaultBackoff is the jittered exponential backoff before retry n.
func defaultBackoff(n int) time.Duration {
	d := min(baseBackoff<<min(n, 10), maxBackoff)
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}
