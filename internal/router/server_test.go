package router

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// servedRouter is a Server run on loopback listeners until the test stops it.
type servedRouter struct {
	router        *Router
	url, adminURL string
	stop          context.CancelFunc
	done          chan struct{} // closed when Serve returned, with err
	err           error
}

func serveRouter(t *testing.T, cfg config.Config, shutdownTimeout time.Duration) *servedRouter {
	t.Helper()
	return serveRouterWith(t, cfg, func(s *Server) { s.ShutdownTimeout = shutdownTimeout })
}

// serveRouterWith serves cfg with a Server that configure adjusts.
func serveRouterWith(t *testing.T, cfg config.Config, configure func(*Server)) *servedRouter {
	t.Helper()
	r, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &servedRouter{router: r, url: "http://" + ln.Addr().String(), adminURL: "http://" + adminLn.Addr().String(), stop: stop,
		done: make(chan struct{})}
	srv := &Server{Router: r}
	if configure != nil {
		configure(srv)
	}
	go func() {
		s.err = srv.Serve(ctx, ln, adminLn)
		close(s.done)
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Error("the server did not stop")
		}
	})
	return s
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// eventually polls cond every 10 ms for at most 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 10 s", what)
}

func TestServerShutsDownGracefully(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	step := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		close(entered)
		<-release
		_, _ = w.Write([]byte("finished"))
	})
	s := serveRouter(t, config.Config{Steps: []config.Step{{Name: "slow", URL: step.URL}}}, time.Minute)
	if code, _ := get(t, s.adminURL+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before shutdown: %d", code)
	}

	inflight := make(chan answer, 1)
	go func() { inflight <- post(t, s.url, "", "in", nil) }()
	<-entered
	s.stop()

	// Told to stop: not ready any more, and no new connection is accepted...
	eventually(t, "/readyz failing", func() bool { code, _ := get(t, s.adminURL+"/readyz"); return code == http.StatusServiceUnavailable })
	if code, _ := get(t, s.adminURL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while draining: %d", code)
	}
	eventually(t, "new connections refused", func() bool {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.url, "http://"), time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	})
	select {
	case <-s.done:
		t.Fatalf("the server stopped with a request in flight: %v", s.err)
	default:
	}

	// ...but the request in flight finishes, then the server returns.
	close(release)
	if a := <-inflight; a.status != http.StatusOK || a.body != "finished" {
		t.Errorf("the request in flight: %d %q", a.status, a.body)
	}
	select {
	case <-s.done:
		if s.err != nil {
			t.Errorf("Serve: %v", s.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not return after its last request")
	}
}

func TestServerCutsRequestsAfterShutdownTimeout(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	step := newStep(t, func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		close(entered)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	s := serveRouter(t, config.Config{Steps: []config.Step{{Name: "stuck", URL: step.URL}}}, 100*time.Millisecond)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader("in"))
		if res, err := http.DefaultClient.Do(req); err == nil {
			_ = res.Body.Close()
		}
	}()
	<-entered
	s.stop()
	select {
	case <-s.done:
		if s.err == nil || !strings.Contains(s.err.Error(), "were cut") {
			t.Errorf("Serve: %v, want an error saying requests were cut", s.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server waited past its shutdown timeout")
	}
}

func TestServerExposesMetrics(t *testing.T) {
	ok := appendStep(t, "", "text/plain", nil)
	var fails int
	flaky := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if fails++; fails == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	s := serveRouter(t, config.Config{Steps: []config.Step{{Name: "first", URL: ok.URL}, {Name: "second", URL: flaky.URL, Retries: 1}}}, time.Minute)
	if a := post(t, s.url, "", "in", nil); a.status != http.StatusOK {
		t.Fatalf("answer %d %q", a.status, a.body)
	}
	req, _ := http.NewRequest(http.MethodGet, s.url, nil)
	if res, err := http.DefaultClient.Do(req); err == nil {
		_ = res.Body.Close()
	}
	code, text := get(t, s.adminURL+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`pipeline_router_requests_total{code="200"} 1`,
		`pipeline_router_requests_total{code="405"} 1`,
		`pipeline_router_request_duration_seconds_count{code="200"} 1`,
		`pipeline_router_request_duration_seconds_count{code="405"} 1`,
		`pipeline_router_step_duration_seconds_count{step="first"} 1`,
		`pipeline_router_step_duration_seconds_count{step="second"} 2`,
		`pipeline_router_step_retries_total{step="first"} 0`,
		`pipeline_router_step_retries_total{step="second"} 1`,
		`pipeline_router_step_errors_total{reason="server_error",step="second"} 1`,
		`pipeline_router_step_errors_total{reason="timeout",step="first"} 0`,
		`go_goroutines `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, _ := get(t, s.adminURL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
}

// A request's duration is measured end to end: through every step, not one step's call.
func TestRequestDurationIsEndToEnd(t *testing.T) {
	slow := func(d time.Duration) *stepServer {
		return newStep(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			time.Sleep(d)
			_, _ = w.Write([]byte("ok"))
		})
	}
	a, b := slow(40*time.Millisecond), slow(60*time.Millisecond)
	s := serveRouter(t, config.Config{Steps: []config.Step{{Name: "a", URL: a.URL}, {Name: "b", URL: b.URL}}}, time.Minute)
	if got := post(t, s.url, "", "in", nil); got.status != http.StatusOK {
		t.Fatalf("answer %d %q", got.status, got.body)
	}
	_, text := get(t, s.adminURL+"/metrics")
	var sum float64
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(line, `pipeline_router_request_duration_seconds_sum{code="200"} `); ok {
			var err error
			if sum, err = strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sum < 0.1 {
		t.Errorf("the request took %.3f s by the histogram, less than its two steps' 0.1 s", sum)
	}
}

// Go's profiles are served only when asked for: they show the program's internals.
func TestProfilesOnlyWhenAskedFor(t *testing.T) {
	ok := newStep(t, func(_ http.ResponseWriter, r *http.Request) { _, _ = io.ReadAll(r.Body) })
	cfg := config.Config{Steps: []config.Step{{Name: "only", URL: ok.URL}}}
	off := serveRouter(t, cfg, time.Minute)
	if code, _ := get(t, off.adminURL+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("profiles served by default: %d", code)
	}
	on := serveRouterWith(t, cfg, func(s *Server) { s.Profiling = true })
	if code, text := get(t, on.adminURL+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(text, "goroutine") {
		t.Errorf("profiles asked for: %d %.100q", code, text)
	}
}
