package router

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// fakeClock is a time of day the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestRouterRetriesWithinTheStepsRetryBudget(t *testing.T) {
	down := statusStep(t, http.StatusServiceUnavailable, "down")
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	tr := newTestRouterWith(t, config.Config{Steps: []config.Step{{Name: "down", URL: down.URL, Retries: 3}}}, io.Discard,
		func(o *Options) { o.Clock = clock.Now })
	// A hundred requests within one second: the budget allows 20% of 100 plus 10 × 10
	// retries, 120, where retries alone would allow 300.
	for range 100 {
		if a := post(t, tr.url, "", "in", nil); a.status != http.StatusBadGateway {
			t.Fatalf("answer %d %q, want 502 with the step's last answer", a.status, a.body)
		}
	}
	if got := down.calls.Load(); got != 220 {
		t.Errorf("the step was called %d times, want 100 requests + 120 retries", got)
	}
	if got := tr.counter(t, "retries", "down"); got != 120 {
		t.Errorf("retries_total: %v, want 120", got)
	}
	// The first 35 requests got their 3 retries (the 35th within 20% of 35 plus 100); of
	// the 65 others each was refused a retry once.
	if got := tr.counter(t, "budget_exhausted", "down"); got != 65 {
		t.Errorf("retries_budget_exhausted_total: %v, want 65", got)
	}
	// Ten seconds later the window is empty again: the floor allows the retries.
	clock.Advance(11 * time.Second)
	post(t, tr.url, "", "in", nil)
	if got := down.calls.Load(); got != 220+4 {
		t.Errorf("after the window: the step was called %d times more, want 4", got-220)
	}
}

// TestRouterRetryBudgetAllowsEveryRetryAtLowLoad sends a request a second to a step that always
// answers 503: a fresh router makes every retry each request asks for.
func TestRouterRetryBudgetAllowsEveryRetryAtLowLoad(t *testing.T) {
	down := statusStep(t, http.StatusServiceUnavailable, "down")
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	tr := newTestRouterWith(t, config.Config{Steps: []config.Step{{Name: "down", URL: down.URL, Retries: 2}}}, io.Discard,
		func(o *Options) { o.Clock = clock.Now })
	for i := range 20 {
		if a := post(t, tr.url, "", "in", nil); a.status != http.StatusBadGateway {
			t.Fatalf("request %d: answer %d %q, want 502", i+1, a.status, a.body)
		}
		clock.Advance(time.Second)
	}
	if got := down.calls.Load(); got != 60 {
		t.Errorf("the step was called %d times, want 20 requests × 3 attempts", got)
	}
	if got := tr.counter(t, "budget_exhausted", "down"); got != 0 {
		t.Errorf("retries_budget_exhausted_total: %v, want 0", got)
	}
}

// timedStep answers with the answers in turn (the last one again once they run out), and
// records when each call came.
type timedStep struct {
	*stepServer
	mu    sync.Mutex
	times []time.Time
}

func newTimedStep(t *testing.T, answers ...func(w http.ResponseWriter)) *timedStep {
	ts := &timedStep{}
	ts.stepServer = newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		ts.mu.Lock()
		n := len(ts.times)
		ts.times = append(ts.times, time.Now())
		ts.mu.Unlock()
		answers[min(n, len(answers)-1)](w)
	})
	return ts
}

func (ts *timedStep) gap(i int) time.Duration {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.times[i].Sub(ts.times[i-1])
}

func answerWith(status int, retryAfter, body string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

func TestRouterWaitsForRetryAfterBeforeTheNextAttempt(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			step := newTimedStep(t, answerWith(status, "1", "later"), answerWith(http.StatusOK, "", "done"))
			tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "busy", URL: step.URL, Retries: 2}}})
			a := post(t, tr.url, "", "in", nil)
			if a.status != http.StatusOK || a.body != "done" {
				t.Fatalf("answer %d %q, want the second attempt's 200", a.status, a.body)
			}
			if got := step.calls.Load(); got != 2 {
				t.Fatalf("the step was called %d times, want 2", got)
			}
			if gap := step.gap(1); gap < time.Second {
				t.Errorf("the second attempt came %s after the first, before Retry-After: 1", gap)
			}
		})
	}
}

func TestRouterGivesRetryAfterBackWhenItDoesNotFitTheDeadline(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			step := newTimedStep(t, answerWith(status, "120", "come back later"), answerWith(http.StatusOK, "", "done"))
			tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "busy", URL: step.URL, Retries: 3}}, RequestTimeoutSeconds: 60})
			a := post(t, tr.url, "", "in", nil)
			if a.status != status || a.header.Get("Retry-After") != "120" {
				t.Fatalf("answer %d (Retry-After %q) %q, want %d with the step's Retry-After", a.status,
					a.header.Get("Retry-After"), a.body, status)
			}
			if a.header.Get(config.HeaderLastStep) != "busy" {
				t.Errorf("%s %q", config.HeaderLastStep, a.header.Get(config.HeaderLastStep))
			}
			if got := step.calls.Load(); got != 1 {
				t.Errorf("the step was called %d times, want once", got)
			}
		})
	}
}

func TestRouterRetriesOnlyWhatMaySucceedAnotherTime(t *testing.T) {
	closed := newStep(t, func(http.ResponseWriter, *http.Request) {})
	refusing := closed.URL
	closed.Close()
	// reset reads the request, then drops the connection without answering.
	reset := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
		}
	})
	notIdempotent := false
	for _, tc := range []struct {
		name       string
		step       *stepServer
		url        string
		idempotent *bool
		status     int
		calls      int32 // by the step's count, or, for a refused connection, by errors_total
	}{
		{"500 is the step's verdict", statusStep(t, 500, "bug"), "", nil, http.StatusBadGateway, 1},
		{"501", statusStep(t, 501, "no"), "", nil, http.StatusBadGateway, 1},
		{"502", statusStep(t, 502, "gw"), "", nil, http.StatusBadGateway, 3},
		{"503", statusStep(t, 503, "busy"), "", nil, http.StatusBadGateway, 3},
		{"504", statusStep(t, 504, "gw"), "", nil, http.StatusBadGateway, 3},
		{"429 without Retry-After", statusStep(t, 429, "slow down"), "", nil, http.StatusTooManyRequests, 1},
		{"503, not idempotent", statusStep(t, 503, "busy"), "", &notIdempotent, http.StatusBadGateway, 1},
		{"reset", reset, "", nil, http.StatusBadGateway, 3},
		{"reset, not idempotent", reset, "", &notIdempotent, http.StatusBadGateway, 1},
		{"refused, not idempotent", nil, refusing, &notIdempotent, http.StatusBadGateway, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, before := tc.url, int32(0)
			if tc.step != nil {
				url, before = tc.step.URL, tc.step.calls.Load()
			}
			tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "s", URL: url, Retries: 2, Idempotent: tc.idempotent}}})
			a := post(t, tr.url, "", "in", nil)
			if a.status != tc.status {
				t.Errorf("answer %d %q, want %d", a.status, a.body, tc.status)
			}
			calls := int32(tr.counter(t, "errors", "s", ReasonConnection))
			if tc.step != nil {
				calls = tc.step.calls.Load() - before
			}
			if calls != tc.calls {
				t.Errorf("%d attempts, want %d", calls, tc.calls)
			}
		})
	}
}

func TestRouterEndsAttemptsAtTheRequestsDeadline(t *testing.T) {
	hung := newStep(t, func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done()
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "hung", URL: hung.URL, TimeoutSeconds: 600, Retries: 2}},
		RequestTimeoutSeconds: 0.3})
	a := post(t, tr.url, "", "in", nil)
	if a.status != http.StatusGatewayTimeout {
		t.Fatalf("answer %d %q, want 504", a.status, a.body)
	}
	if e := a.errorBody(t); e.Step != "hung" || !strings.Contains(e.Error, "the request's deadline passed") {
		t.Errorf("error body %+v", e)
	}
	if got := hung.calls.Load(); got != 1 {
		t.Errorf("the step was called %d times: no retry once the request's deadline passed", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"3", 3 * time.Second, true},
		{" 120 ", 120 * time.Second, true},
		{"99999999999999999999999", maxRetryAfter, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"Tue, 01 Jan 2030 12:00:30 GMT", 30 * time.Second, true},
		{"Tuesday, 01-Jan-30 12:01:00 GMT", time.Minute, true},
		{"Tue, 01 Jan 2030 11:00:00 GMT", 0, true},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %s, %v; want %s, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
