package router

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// TestRouterErrorBodiesNameTheStepNotItsAddress checks that an error answer tells the caller
// which step failed and how, in the router's own words, with the request id, and never the
// step's address or its stopWhen expression, which go to the log with the same request id.
func TestRouterErrorBodiesNameTheStepNotItsAddress(t *testing.T) {
	const expr = `size(response.faces) == 0`
	closed := newStep(t, func(http.ResponseWriter, *http.Request) {})
	closedURL := closed.URL
	closed.Close()
	hung := newStep(t, func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		<-r.Context().Done()
	})
	unavailable := statusStep(t, http.StatusServiceUnavailable, "overloaded at 10.0.0.5:8080")
	notJSON := statusStep(t, http.StatusOK, "not json")
	first := appendStep(t, "|1", "text/plain", nil)

	for _, tc := range []struct {
		name      string
		steps     []config.Step
		requestID string // sent by the caller; generated when empty
		status    int
		reason    string
		wantBody  string // the error message, exactly
		wantLog   []string
	}{{
		name:      "connection refused",
		steps:     []config.Step{{Name: "detect", URL: first.URL}, {Name: "recognise", URL: closedURL, Retries: 1}},
		requestID: "req-refused",
		status:    http.StatusBadGateway,
		reason:    ReasonConnection,
		wantBody:  "step 2 (recognise) refused the connection",
		wantLog:   []string{"connection refused", closedURL},
	}, {
		name: "timeout",
		steps: []config.Step{{Name: "detect", URL: first.URL},
			{Name: "recognise", URL: hung.URL, TimeoutSeconds: 0.2}},
		requestID: "req-timeout",
		status:    http.StatusGatewayTimeout,
		reason:    ReasonTimeout,
		wantBody:  "step 2 (recognise) timed out after 200ms",
		wantLog:   []string{hung.URL},
	}, {
		name:      "5xx",
		steps:     []config.Step{{Name: "detect", URL: first.URL}, {Name: "recognise", URL: unavailable.URL}},
		requestID: "req-unavailable",
		status:    http.StatusBadGateway,
		reason:    ReasonServerError,
		wantBody:  "step 2 (recognise) answered 503 Service Unavailable",
		wantLog:   []string{unavailable.URL},
	}, {
		name: "stopWhen fails at evaluation",
		steps: []config.Step{{Name: "recognise", URL: notJSON.URL, StopWhen: expr},
			{Name: "never", URL: first.URL}},
		status:   http.StatusBadGateway,
		reason:   ReasonStopWhen,
		wantBody: "the stopWhen condition of step 1 (recognise) could not be evaluated",
		wantLog:  []string{`size(response.faces) == 0`, "no such key", notJSON.URL},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tr, log := newLoggedTestRouter(t, config.Config{Pipeline: "team-a/faces", Steps: tc.steps})
			var header http.Header
			if tc.requestID != "" {
				header = http.Header{config.HeaderRequestID: {tc.requestID}}
			}
			a := post(t, tr.url, "text/plain", "in", header)
			id := a.header.Get(config.HeaderRequestID)
			if a.status != tc.status || id == "" || (tc.requestID != "" && id != tc.requestID) {
				t.Fatalf("answer %d with request id %q: %s, want %d with the request id", a.status, id, a.body, tc.status)
			}

			e := a.errorBody(t)
			if e.Error != tc.wantBody || e.Step != "recognise" || e.StepIndex != stepIndex(tc.steps, "recognise") ||
				e.Reason != tc.reason || e.RequestID != id {
				t.Errorf("error body %s, want error %q, step recognise (index %d), reason %s, request id %q",
					a.body, tc.wantBody, stepIndex(tc.steps, "recognise"), tc.reason, id)
			}
			for _, s := range tc.steps {
				u, err := url.Parse(s.URL)
				if err != nil {
					t.Fatal(err)
				}
				for _, secret := range []string{u.Host, u.Hostname(), u.Port(), s.URL} {
					if strings.Contains(a.body, secret) {
						t.Errorf("the body %s names the address %q of step %s", a.body, secret, s.Name)
					}
				}
			}
			for _, secret := range []string{"127.0.0.1", "10.0.0.5", "http://", "dial", expr, "response.faces", "no such key"} {
				if strings.Contains(a.body, secret) {
					t.Errorf("the body %s contains %q", a.body, secret)
				}
			}

			line := logLine(t, log.String(), "requestID="+id)
			for _, want := range append([]string{"step=recognise", "reason=" + tc.reason}, tc.wantLog...) {
				if !strings.Contains(line, want) {
					t.Errorf("log line %s lacks %q", line, want)
				}
			}
		})
	}
}

func TestRouterErrorBodyOfAnUnreadableRequestBodyIsLogged(t *testing.T) {
	step := appendStep(t, "", "text/plain", nil)
	tr, log := newLoggedTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: step.URL}}})
	// A chunked body whose chunk size is not a number: reading it fails.
	conn, err := (&net.Dialer{}).Dial("tcp", strings.TrimPrefix(tr.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_, _ = conn.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nX-Request-Id: req-short\r\n" +
		"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n"))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"requestId":"req-short"`) ||
		strings.Contains(string(b), "chunk") {
		t.Errorf("answer %d %s, want 400 with the request id and the router's words", res.StatusCode, b)
	}
	if line := logLine(t, log.String(), "requestID=req-short"); !strings.Contains(line, "chunk") {
		t.Errorf("log line %s lacks the read error", line)
	}
}

// stepIndex is the 1-based position of the step named name.
func stepIndex(steps []config.Step, name string) int {
	for i, s := range steps {
		if s.Name == name {
			return i + 1
		}
	}
	return 0
}

// logLine is the one line of log that contains want.
func logLine(t *testing.T, log, want string) string {
	t.Helper()
	var found []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, want) {
			found = append(found, line)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d log lines with %q, want 1:\n%s", len(found), want, log)
	}
	return found[0]
}

func TestConnectionTroubleInFixedWords(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8080}
	opErr := func(err error) error {
		return &url.Error{Op: "Post", URL: "http://10.0.0.5:8080/", Err: &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: err}}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{opErr(&os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}), "refused the connection"},
		{opErr(&os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}), "closed the connection before its response was complete"},
		{&url.Error{Op: "Post", URL: "http://10.0.0.5:8080/", Err: io.EOF}, "closed the connection before its response was complete"},
		{opErr(&net.DNSError{Err: "no such host", Name: "faces-recognise.team-a.svc"}), "could not be reached: its name did not resolve"},
		{opErr(syscall.EHOSTUNREACH), "could not be reached"},
	} {
		if got := connectionTrouble(tc.err); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
}
