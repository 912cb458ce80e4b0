package router

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// The client's own cases, the header it writes and a request sent again on a new connection,
// are in internal/router/stepclient's desync_test.go.

// forged is an answer a step's connection holds after the answer it owes: were it read as the
// next call's answer, one request would get what belongs to none.
const forged = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nforged"

// untilClose is the body of an answer that only the end of its connection delimits: longer than
// a block and than a connection's read buffer, so that it ends in neither the first read nor the
// first block.
var untilClose = strings.Repeat("0123456789abcdef", 20<<10)

// TestRouterNeverMixesAnswersAcrossRequests runs steps whose first answer is framed so that
// bytes are left on the connection after it, or so that the connection may not be kept: the
// next call must get its own answer, whatever the body's size, never the bytes left over.
func TestRouterNeverMixesAnswersAcrossRequests(t *testing.T) {
	for name, tc := range map[string]struct {
		first  string         // the raw answer to the first call
		late   string         // more bytes, sent after a pause
		closes bool           // the step ends its side of the connection after the first answer
		ok     func(int) bool // the first call's acceptable statuses
		want   string         // the first call's whole body (when not empty)
		conns  int32          // connections the two calls must take (0: any)
	}{
		"bytes after the answer": {first: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + forged,
			ok: is(http.StatusOK), conns: 2},
		"bytes after the answer, a moment later": {first: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", late: forged,
			ok: is(http.StatusOK), conns: 2},
		"Content-Length with Transfer-Encoding": {
			first: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n" + forged,
			ok:    func(s int) bool { return s == http.StatusOK || s == http.StatusBadGateway }},
		"two Content-Lengths": {first: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 8\r\n\r\nok" + forged,
			ok: is(http.StatusBadGateway), conns: 2},
		"HTTP/1.0 without keep-alive": {first: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
			ok: is(http.StatusOK), conns: 2},
		// The step's end of file is the body's end: all of it is passed on, and the connection,
		// which the step still reads, is not sent the next request (it would go unanswered).
		"HTTP/1.0 without Content-Length, the body ending with the connection": {
			first: "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + untilClose, closes: true,
			ok: is(http.StatusOK), want: untilClose, conns: 2},
		"HTTP/1.0 with keep-alive": {first: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
			ok: is(http.StatusOK), want: "ok", conns: 1},
		"HTTP/1.0 with keep-alive, bytes after the answer": {
			first: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok" + forged,
			ok:    is(http.StatusOK), want: "ok", conns: 2},
		"Connection: close, the connection left open": {first: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
			ok: is(http.StatusOK), conns: 2},
		"304 with a body": {first: "HTTP/1.1 304 Not Modified\r\nContent-Length: 6\r\n\r\nforged",
			ok: is(http.StatusBadGateway), conns: 2}, // the router answers a step's 3xx with 502
		"a chunked answer, the connection kept": {first: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
			ok: is(http.StatusOK), conns: 1},
		"204 with a body": {first: "HTTP/1.1 204 No Content\r\nContent-Length: 6\r\n\r\nforged",
			ok: is(http.StatusOK), conns: 2}, // the router answers a step's 2xx with 200
	} {
		for _, size := range []int{16, 1 << 20} {
			t.Run(name+", "+strconv.Itoa(size)+" bytes", func(t *testing.T) {
				s := newScriptedStep(t, tc.first, tc.late, tc.closes)
				tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "odd", URL: s.url}}})
				a := post(t, tr.url, "text/plain", strings.Repeat("a", size), nil)
				if !tc.ok(a.status) || strings.Contains(a.body, "forged") {
					t.Fatalf("first call: answer %d %.100q", a.status, a.body)
				}
				if tc.want != "" && a.body != tc.want {
					t.Fatalf("first call: a body of %d bytes %.100q, want the step's %d", len(a.body), a.body, len(tc.want))
				}
				if tc.late != "" {
					time.Sleep(100 * time.Millisecond)
				}
				body := strings.Repeat("b", size)
				if a := post(t, tr.url, "text/plain", body, nil); a.status != http.StatusOK || a.body != body {
					t.Fatalf("second call: answer %d %.100q, want its own", a.status, a.body)
				}
				if got := s.conns.Load(); tc.conns != 0 && got != tc.conns {
					t.Errorf("%d connections, want %d: a connection is kept when, and only when, its answer's framing allows it", got, tc.conns)
				}
			})
		}
	}
}

func is(status int) func(int) bool { return func(s int) bool { return s == status } }

// newScriptedStep is a step that answers the first call it gets with the raw bytes first (then
// late, after a pause), and every other call, on any connection, with an echo of its body. With
// closes, it then ends its side of that connection, as an HTTP/1.0 server whose answer's body
// runs to the connection's end, but goes on reading it: a request sent there gets no answer.
func newScriptedStep(t *testing.T, first, late string, closes bool) *rawStep {
	t.Helper()
	var calls atomic.Int32
	return newRawStep(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(req.Body)
			if calls.Add(1) == 1 {
				_, _ = io.WriteString(c, first)
				if late != "" {
					time.Sleep(20 * time.Millisecond)
					_, _ = io.WriteString(c, late)
				}
				if closes {
					_ = c.(*net.TCPConn).CloseWrite()
				}
				continue
			}
			writeEcho(c, b)
		}
	})
}

// TestRouterDoesNotResendWhatReachedANonIdempotentStep runs a step that takes a whole request
// on a kept connection and resets it without answering: a step with idempotent false gets that
// request once, even when the caller's Idempotency-Key is passed on (net/http would replay a
// request carrying it), whatever the body's size.
func TestRouterDoesNotResendWhatReachedANonIdempotentStep(t *testing.T) {
	for _, size := range []int{16, 1 << 20} {
		t.Run(strconv.Itoa(size)+" bytes", func(t *testing.T) {
			var requests atomic.Int32
			s := newRawStep(t, func(c net.Conn, br *bufio.Reader) {
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					b, _ := io.ReadAll(req.Body)
					if requests.Add(1) == 2 {
						_ = c.(*net.TCPConn).SetLinger(0)
						return
					}
					writeEcho(c, b)
				}
			})
			no := false
			tr := newTestRouter(t, config.Config{PropagateHeaders: []string{"Idempotency-Key"},
				Steps: []config.Step{{Name: "once", URL: s.url, Retries: 2, Idempotent: &no}}})
			body := strings.Repeat("x", size)
			key := http.Header{"Idempotency-Key": {"k"}}
			if a := post(t, tr.url, "text/plain", body, key); a.status != http.StatusOK {
				t.Fatalf("first call: answer %d", a.status)
			}
			if a := post(t, tr.url, "text/plain", body, key); a.status != http.StatusBadGateway {
				t.Fatalf("second call: answer %d, want 502", a.status)
			}
			if got := requests.Load(); got != 2 {
				t.Errorf("the step got %d requests, want 2: the second was sent again", got)
			}
		})
	}
}
