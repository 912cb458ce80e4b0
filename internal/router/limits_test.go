package router

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// openIdleRequest sends the head of a POST that announces contentLength bytes of body and
// sends none of them. It returns once the router has started to read the body (it answers
// the request's Expect: 100-continue then); the connection stays open until the test ends.
func openIdleRequest(t *testing.T, url string, contentLength int64) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Write([]byte("POST / HTTP/1.1\r\nHost: router\r\nContent-Type: text/plain\r\n" +
		"Expect: 100-continue\r\nContent-Length: " + strconv.FormatInt(contentLength, 10) + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("the router did not start reading the announced body: %q %v", line, err)
	}
	return c
}

// TestServerIdleBodiesDoNotHoldTheBudget opens four requests that announce a body of
// maxBodyBytes (64 MiB) and send nothing: they must not keep other callers out.
func TestServerIdleBodiesDoNotHoldTheBudget(t *testing.T) {
	step := appendStep(t, "|ok", "text/plain", nil)
	s := serveRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: step.URL}}}, 0)
	for range 4 {
		openIdleRequest(t, s.url, config.DefaultMaxBodyBytes)
	}
	if a := post(t, s.url, "text/plain", "hello", nil); a.status != http.StatusOK || a.body != "hello|ok" {
		t.Fatalf("another caller while four bodies are announced: %d %q, want 200", a.status, a.body)
	}
}

func TestServerCutsOffABodyThatArrivesTooSlowly(t *testing.T) {
	step := appendStep(t, "|ok", "text/plain", nil)
	s := serveRouterWith(t, config.Config{Steps: []config.Step{{Name: "one", URL: step.URL}}}, func(s *Server) {
		s.MinBodyRate = 1 << 10
		s.bodyRateWindow = time.Second
	})
	c := openIdleRequest(t, s.url, 4<<10)
	if _, err := c.Write([]byte(strings.Repeat("x", 100))); err != nil {
		t.Fatal(err)
	}
	// The caller sends nothing more: the router answers 408 and closes the connection.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "slower than the minimum rate") {
		t.Fatalf("answer %d %q, want 408", res.StatusCode, body)
	}
	if got := s.router.budget.Used(); got != 0 {
		t.Errorf("%d buffered bytes still counted after the slow body was cut", got)
	}
	if step.calls.Load() != 0 {
		t.Error("the step was called with a body cut short")
	}
	// A caller that sends its body at once is served.
	if a := post(t, s.url, "text/plain", strings.Repeat("y", 2000), nil); a.status != http.StatusOK {
		t.Errorf("a body sent at once: %d %q", a.status, a.body)
	}
}

func TestServerBoundsTheWritingOfAnAnswer(t *testing.T) {
	big := strings.Repeat("z", 32<<20)
	step := statusStep(t, http.StatusOK, big)
	s := serveRouterWith(t, config.Config{Steps: []config.Step{{Name: "big", URL: step.URL}}}, func(s *Server) {
		s.WriteTimeout = 200 * time.Millisecond
	})
	c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := c.Write([]byte("POST / HTTP/1.1\r\nHost: router\r\nContent-Length: 2\r\n\r\nin")); err != nil {
		t.Fatal(err)
	}
	// The caller reads nothing: once the write timeout passes, the router gives up the answer and
	// the buffer it held.
	eventually(t, "the answer's buffer released", func() bool {
		return step.calls.Load() == 1 && s.router.budget.Used() == 0
	})
}

func TestServerCapsTheRequestsInFlight(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{}, 3)
	held := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		entered <- struct{}{}
		<-release
		_, _ = w.Write([]byte("done"))
	})
	s := serveRouterWith(t, config.Config{Steps: []config.Step{{Name: "held", URL: held.URL}}}, func(s *Server) { s.MaxInFlight = 2 })
	answers := make(chan answer, 2)
	for range 2 {
		go func() { answers <- post(t, s.url, "", "in", nil) }()
	}
	<-entered
	<-entered
	a := post(t, s.url, "", "in", nil)
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "1" {
		t.Errorf("a third request while two are in flight: %d (Retry-After %q) %q, want 503 with Retry-After: 1",
			a.status, a.header.Get("Retry-After"), a.body)
	}
	if a.errorBody(t).RequestID == "" {
		t.Error("the refusal has no request id")
	}
	close(release)
	for range 2 {
		if a := <-answers; a.status != http.StatusOK {
			t.Errorf("a request in flight: %d %q", a.status, a.body)
		}
	}
	if a := post(t, s.url, "", "in", nil); a.status != http.StatusOK {
		t.Errorf("a request once the others finished: %d %q", a.status, a.body)
	}
	if got := held.calls.Load(); got != 3 {
		t.Errorf("the step was called %d times, want 3", got)
	}
	if got := testutil.ToFloat64(s.router.metrics.requests.WithLabelValues("503")); got != 1 {
		t.Errorf("requests_total{code=503}: %v", got)
	}
}

func TestBodyDeadline(t *testing.T) {
	start := time.Unix(1000, 0)
	g := &guard{minBodyRate: 64 << 10, grace: time.Second, window: 10 * time.Second}
	for _, tc := range []struct {
		name string
		rate int64
		read int64
		want time.Duration
	}{
		{"nothing received: the grace and one window", 64 << 10, 0, 11 * time.Second},
		{"one window's bytes: one more window", 64 << 10, 64 << 10, 21 * time.Second},
		{"far ahead: config.BodyReadTimeout at the latest", 64 << 10, 1 << 30, config.BodyReadTimeout},
		{"a tiny rate and a large body: config.BodyReadTimeout, not a time in the past", 1, 2 << 30, config.BodyReadTimeout},
	} {
		g.minBodyRate = tc.rate
		if got := g.bodyDeadline(start, tc.read).Sub(start); got != tc.want {
			t.Errorf("%s: deadline %s after the start, want %s", tc.name, got, tc.want)
		}
	}
}
