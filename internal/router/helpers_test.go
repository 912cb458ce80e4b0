package router

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// stepServer is a step on a loopback address that counts its calls.
type stepServer struct {
	*httptest.Server
	calls atomic.Int32
}

func newStep(t testing.TB, h http.HandlerFunc) *stepServer {
	t.Helper()
	s := &stepServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// rawStep is a step on a raw loopback listener: serve handles each connection, and conns
// counts them.
type rawStep struct {
	url   string
	conns atomic.Int32
}

func newRawStep(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) *rawStep {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	s := &rawStep{url: "http://" + ln.Addr().String() + "/"}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go func() {
				defer func() { _ = c.Close() }()
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	return s
}

// writeEcho answers on a raw step's connection with body, as text/plain.
func writeEcho(c net.Conn, body []byte) {
	_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// testRouter is a router served on a loopback address.
type testRouter struct {
	*Router
	url string
	reg *prometheus.Registry
}

func newTestRouter(t testing.TB, cfg config.Config) *testRouter {
	t.Helper()
	return newTestRouterLoggingTo(t, cfg, io.Discard)
}

// logBuffer is a buffer the router's logger and the test share.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newLoggedTestRouter is a test router whose log the test reads.
func newLoggedTestRouter(t testing.TB, cfg config.Config) (*testRouter, *logBuffer) {
	t.Helper()
	log := &logBuffer{}
	return newTestRouterLoggingTo(t, cfg, log), log
}

func newTestRouterLoggingTo(t testing.TB, cfg config.Config, log io.Writer) *testRouter {
	t.Helper()
	return newTestRouterWith(t, cfg, log, nil)
}

// newTestRouterWith is a test router whose options configure adjusts.
func newTestRouterWith(t testing.TB, cfg config.Config, log io.Writer, configure func(*Options)) *testRouter {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts := Options{
		Logger:     slog.New(slog.NewTextHandler(log, nil)),
		Registerer: reg,
		Backoff:    func(int) time.Duration { return time.Millisecond },
	}
	if configure != nil {
		configure(&opts)
	}
	r, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &testRouter{Router: r, url: srv.URL, reg: reg}
}

// answer is what the router answered.
type answer struct {
	status int
	header http.Header
	body   string
}

// errorBody decodes an error answer's body, failing the test when it is not the router's.
func (a answer) errorBody(t *testing.T) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || e.Error == "" {
		t.Fatalf("answer %d %q is not an error body: %v", a.status, a.body, err)
	}
	return e
}

func post(t *testing.T, url, contentType, body string, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: res.StatusCode, header: res.Header, body: string(b)}
}

// appendStep answers the body it received with suffix appended, in content type out, and
// records the content type it received.
func appendStep(t *testing.T, suffix, out string, gotType *atomic.Value) *stepServer {
	return newStep(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if gotType != nil {
			gotType.Store(r.Header.Get("Content-Type"))
		}
		w.Header().Set("Content-Type", out)
		_, _ = w.Write(append(b, suffix...))
	})
}

func jsonStep(t *testing.T, body string) *stepServer {
	return newStep(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, bytes.NewReader([]byte(body)))
	})
}

func statusStep(t *testing.T, status int, body string) *stepServer {
	return newStep(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
}

// counter is the value of a counter series of the router.
func (tr *testRouter) counter(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	var c prometheus.Collector
	switch name {
	case "requests":
		c = tr.metrics.requests.WithLabelValues(labels...)
	case "retries":
		c = tr.metrics.stepRetries.WithLabelValues(labels...)
	case "errors":
		c = tr.metrics.stepErrors.WithLabelValues(labels...)
	case "budget_exhausted":
		c = tr.metrics.stepRetriesBudgetExhausted.WithLabelValues(labels...)
	default:
		t.Fatalf("no counter %s", name)
	}
	return testutil.ToFloat64(c)
}
