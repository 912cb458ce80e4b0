package router

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// TestRouterAnswers502ForA3xxAndFollowsNoRedirect checks that a redirect is an answer like any
// other: not followed, not retried, a 502 naming the step.
func TestRouterAnswers502ForA3xxAndFollowsNoRedirect(t *testing.T) {
	target := appendStep(t, "", "text/plain", nil)
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusNotModified} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			redirect := newStep(t, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				w.Header().Set("Location", target.URL)
				w.WriteHeader(code)
			})
			tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "moved", URL: redirect.URL, Retries: 2}}})
			a := post(t, tr.url, "", "in", nil)
			if a.status != http.StatusBadGateway {
				t.Fatalf("answer %d %q, want 502", a.status, a.body)
			}
			if e := a.errorBody(t); e.Step != "moved" || e.Reason != ReasonUnexpectedStatus ||
				!strings.Contains(e.Error, "which is neither a success nor a client error") {
				t.Errorf("error body %+v", e)
			}
			if got := redirect.calls.Load(); got != 1 {
				t.Errorf("the step was called %d times, want once (no retry)", got)
			}
		})
	}
	if got := target.calls.Load(); got != 0 {
		t.Errorf("a redirect was followed %d times", got)
	}
}

// TestRouterAnswers502ForA1xx runs a step that answers a final 101 (the only 1xx an HTTP
// client returns as an answer) on a raw loopback listener.
func TestRouterAnswers502ForA1xx(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	var calls atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.ReadAll(req.Body)
				calls.Add(1)
				_, _ = c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\n"))
				// The connection stays open until the router closes it.
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "switch", URL: "http://" + ln.Addr().String() + "/", Retries: 2}}})
	a := post(t, tr.url, "", "in", nil)
	if a.status != http.StatusBadGateway {
		t.Fatalf("answer %d %q, want 502", a.status, a.body)
	}
	if e := a.errorBody(t); e.Reason != ReasonUnexpectedStatus || !strings.Contains(e.Error, "answered 101 Switching Protocols") {
		t.Errorf("error body %+v", e)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("the step was called %d times, want once (no retry)", got)
	}
}

func TestDefaultBackoffDoublesWithJitterUpToASecond(t *testing.T) {
	for n, base := range []time.Duration{25, 50, 100, 200, 400, 800, 1000, 1000, 1000, 1000, 1000, 1000, 1000} {
		base *= time.Millisecond
		lo, hi := base/2, base*3/2
		var sum time.Duration
		const samples = 2000
		for range samples {
			d := defaultBackoff(n)
			if d < lo || d >= hi {
				t.Fatalf("backoff before retry %d: %s, want within [%s, %s)", n, d, lo, hi)
			}
			sum += d
		}
		// The jitter is spread over the range, not stuck at one end.
		if mean := sum / samples; mean < base*9/10 || mean > base*11/10 {
			t.Errorf("backoff before retry %d averages %s, want about %s", n, mean, base)
		}
	}
}

func TestRouterUsesTheDefaultBackoffWhenNoneIsGiven(t *testing.T) {
	r, err := New(config.Config{Steps: []config.Step{{Name: "a", URL: "http://127.0.0.1:1/"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if d := r.backoff(0); d < 12500*time.Microsecond || d >= 37500*time.Microsecond {
			t.Fatalf("the router's backoff before the first retry is %s, want 25 ms ± 50%%", d)
		}
	}
}

func TestServerWaitsOnShutdownAsLongAsARequestMayTake(t *testing.T) {
	r, err := New(config.Config{Steps: []config.Step{{Name: "a", URL: "http://127.0.0.1:1/", TimeoutSeconds: 40, Retries: 1}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 2 minutes for the body, 2 × 40 s + 1.5 s for the pipeline, 1 minute for the answer.
	if got, want := (&Server{Router: r}).LongestRequest(), 2*time.Minute+81500*time.Millisecond+time.Minute; got != want {
		t.Errorf("LongestRequest %s, want %s", got, want)
	}
	if got, want := (&Server{Router: r, WriteTimeout: time.Second}).LongestRequest(), 2*time.Minute+81500*time.Millisecond+time.Second; got != want {
		t.Errorf("LongestRequest with a write timeout of 1 s: %s, want %s", got, want)
	}
}
