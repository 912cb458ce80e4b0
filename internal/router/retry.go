package router

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// errRequestDeadline ends a request whose deadline (requestTimeoutSeconds) passed.
var errRequestDeadline = errors.New("the request's deadline passed")

// retryableStatus reports whether a step's 5xx answer may be worth another attempt: a gateway
// or an overloaded server (502, 503, 504). A 500 or 501 is the step's own verdict.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// call calls the step with in, retrying what may succeed another time (see nextAttempt).
func (r *Router) call(ctx context.Context, s *step, header http.Header, in payload) (*stepResponse, *failure) {
	s.budget.request()
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			// The caller went away, or the request's deadline passed: no call starts.
			return nil, s.ended(ctx)
		}
		start := time.Now()
		resp, aerr := r.attempt(ctx, s, header, in)
		s.metrics.duration.Observe(time.Since(start).Seconds())
		switch {
		case aerr != nil:
			s.metrics.failed(aerr.reason)
		case resp.status >= 400:
			s.metrics.failed(ReasonClientError)
		}
		wait, again := r.nextAttempt(ctx, s, attempt, resp, aerr)
		if !again {
			if aerr != nil {
				return nil, s.failAttempt(aerr)
			}
			return resp, nil
		}
		if resp != nil {
			resp.body.Release()
		}
		s.metrics.retries.Inc()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, s.ended(ctx)
		case <-t.C:
		}
	}
}

// nextAttempt decides whether the step is called again after an attempt that answered resp or
// failed with aerr, and after how long. A step is called again when
//   - the attempt failed in a way another may not (a connection error, a timeout, a 502, 503
//     or 504), or answered 429 with a Retry-After;
//   - the step is idempotent, or the attempt sent nothing (the connection was not made);
//   - retries are left, the wait fits in the request's deadline, and the step's retry budget
//     allows one more.
//
// The wait is the backoff, or the step's Retry-After (of a 429 or 503) when that is longer.
func (r *Router) nextAttempt(ctx context.Context, s *step, attempt int, resp *stepResponse, aerr *attemptError) (time.Duration, bool) {
	var retryAfter string
	switch {
	case aerr != nil:
		if !aerr.retryable || (!s.idempotent && !aerr.unsent) {
			return 0, false
		}
		retryAfter = aerr.retryAfter
	case resp.status == http.StatusTooManyRequests && s.idempotent:
		if retryAfter = resp.header.Get("Retry-After"); retryAfter == "" {
			return 0, false
		}
	default:
		return 0, false
	}
	if attempt >= s.retries {
		return 0, false
	}
	wait := r.backoff(attempt)
	if d, ok := parseRetryAfter(retryAfter, r.now()); ok {
		wait = max(wait, d)
	}
	if dl, ok := ctx.Deadline(); ok && wait >= time.Until(dl) {
		return 0, false
	}
	if !s.budget.tryRetry() {
		s.metrics.budgetExhausted.Inc()
		return 0, false
	}
	return wait, true
}

// ended is the step's failure, counted, once the request's context has ended: the caller went
// away (canceled) or the request's deadline passed (timeout).
func (s *step) ended(ctx context.Context) *failure {
	aerr := classify(ctx, context.Cause(ctx), s.timeout)
	s.metrics.failed(aerr.reason)
	return s.failAttempt(aerr)
}

// failAttempt is the failure of a call whose last attempt failed with aerr. A 503 with a
// Retry-After is passed on as a 503 with that Retry-After, so that the caller waits too.
func (s *step) failAttempt(aerr *attemptError) *failure {
	f := s.fail(aerr.reason, s.label()+" "+aerr.what, aerr.err)
	if aerr.status == http.StatusServiceUnavailable && aerr.retryAfter != "" {
		f.status, f.retryAfter = http.StatusServiceUnavailable, aerr.retryAfter
	}
	return f
}
