package router

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/stepclient"
)

func TestRouterKeepsOneConnectionToAStepForSequentialCalls(t *testing.T) {
	var conns sync.Map // the callers' addresses the step saw
	s := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		conns.Store(r.RemoteAddr, true)
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: s.URL}}})
	for i := range 20 {
		if a := post(t, tr.url, "text/plain", strconv.Itoa(i), nil); a.status != http.StatusOK || a.body != strconv.Itoa(i) {
			t.Fatalf("call %d: answer %d %q", i, a.status, a.body)
		}
	}
	n := 0
	conns.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Errorf("20 calls came over %d connections, want 1", n)
	}
}

// TestRouterDoesNotSendOnAConnectionTheStepClosed runs a step that closes every connection
// after its answer without saying so (no Connection: close), as a step's idle timeout or a
// restart would: the router, with no retries, must still never call it on a closed connection.
func TestRouterDoesNotSendOnAConnectionTheStepClosed(t *testing.T) {
	s := newRawStep(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(req.Body)
		writeEcho(c, b)
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "closer", URL: s.url}}})
	for i := range 20 {
		if a := post(t, tr.url, "text/plain", strconv.Itoa(i), nil); a.status != http.StatusOK || a.body != strconv.Itoa(i) {
			t.Fatalf("call %d: answer %d %q", i, a.status, a.body)
		}
		// The step's end of the connection is closed before the next call.
		time.Sleep(5 * time.Millisecond)
	}
	if got := s.conns.Load(); got != 20 {
		t.Errorf("%d connections for 20 calls, want 20", got)
	}
}

func TestRouterSkipsInformationalAnswers(t *testing.T) {
	s := newRawStep(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(req.Body)
			_, _ = fmt.Fprintf(c, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"+
				"HTTP/1.1 100 Continue\r\n\r\n"+
				"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Model-Version: 7\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		}
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "hints", URL: s.url}, {Name: "hints-again", URL: s.url}}})
	for range 3 {
		a := post(t, tr.url, "text/plain", "in", nil)
		if a.status != http.StatusOK || a.body != "in" || a.header.Get("X-Model-Version") != "7" {
			t.Fatalf("answer %d %q %v, want the final answer", a.status, a.body, a.header)
		}
	}
	if got := s.conns.Load(); got != 1 {
		t.Errorf("%d connections, want 1: a connection stays usable after informational answers", got)
	}
}

// TestRouterRefusesAStepThatOnlySendsInformationalAnswers runs a step that sends informational
// answers without end: they count towards stepclient.MaxAnswerHeaderBytes, as one answer's header would.
func TestRouterRefusesAStepThatOnlySendsInformationalAnswers(t *testing.T) {
	var sent atomic.Int64
	s := newRawStep(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.ReadAll(req.Body)
		// A small send buffer: what the step got out is what the router's side took.
		_ = c.(*net.TCPConn).SetWriteBuffer(64 << 10)
		hints := bytes.Repeat([]byte("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"), 100)
		for sent.Load() < 64<<20 {
			n, err := c.Write(hints)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "hints", URL: s.url}}})
	a := post(t, tr.url, "text/plain", "in", nil)
	if a.status != http.StatusBadGateway {
		t.Fatalf("answer %d %q, want 502", a.status, a.body)
	}
	if e := a.errorBody(t); e.Reason != ReasonResponseTooLarge {
		t.Errorf("error body %+v, want reason %s", e, ReasonResponseTooLarge)
	}
	// What the router read (1 MiB), plus what the sockets' buffers hold, which the kernel grows
	// while the router parses answer after answer: far from the 64 MiB the step would send.
	if got := sent.Load(); got >= 16*stepclient.MaxAnswerHeaderBytes {
		t.Errorf("the step sent %d bytes of informational answers before the router stopped reading", got)
	}
}

// TestRouterReadsALargeAnswerWhileItSendsALargeBody runs a step that streams its answer while
// it reads the body, as a full-duplex server may: a client that wrote the whole body before
// reading would wait for ever once both sides' buffers are full.
func TestRouterReadsALargeAnswerWhileItSendsALargeBody(t *testing.T) {
	const size = 32 << 20
	s := newRawStep(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", req.ContentLength)
		_, _ = io.Copy(c, req.Body)
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "stream", URL: s.url, TimeoutSeconds: 20}}})
	a := post(t, tr.url, "application/octet-stream", strings.Repeat("x", size), nil)
	if a.status != http.StatusOK || len(a.body) != size {
		t.Fatalf("answer %d of %d bytes, want 200 with %d", a.status, len(a.body), size)
	}
}

// TestRouterRefusesATruncatedAnswer runs steps that announce more than they send and close the
// connection, the end falling before the body, inside it, and on a block's boundary: each is
// a connection failure, never an answer shorter than announced passed on.
func TestRouterRefusesATruncatedAnswer(t *testing.T) {
	for _, sent := range []int{0, 100, bodies.BlockBytes} {
		t.Run(strconv.Itoa(sent)+" of "+strconv.Itoa(bodies.BlockBytes+500)+" bytes", func(t *testing.T) {
			s := newRawStep(t, func(c net.Conn, br *bufio.Reader) {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s",
					bodies.BlockBytes+500, strings.Repeat("x", sent))
			})
			tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "cut", URL: s.url}}})
			a := post(t, tr.url, "text/plain", "in", nil)
			if a.status != http.StatusBadGateway {
				t.Fatalf("answer %d with %d bytes, want 502", a.status, len(a.body))
			}
			if e := a.errorBody(t); e.Reason != ReasonConnection {
				t.Errorf("reason %q, want %q", e.Reason, ReasonConnection)
			}
		})
	}
}

// TestRouterRefusesATruncatedRequest sends a request that announces a body, sends none and
// ends its side of the connection: the router calls no step and answers nothing that looks
// like a success.
func TestRouterRefusesATruncatedRequest(t *testing.T) {
	s := newStep(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) })
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "echo", URL: s.URL}}})
	c, err := net.Dial("tcp", strings.TrimPrefix(tr.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: router\r\nContent-Type: text/plain\r\nContent-Length: 5000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The caller's end of file also tells the router it went away: no answer, or an error.
	if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		_ = res.Body.Close()
		if res.StatusCode < 400 {
			t.Errorf("answer %d, want none or an error", res.StatusCode)
		}
	}
	if got := s.calls.Load(); got != 0 {
		t.Errorf("the step was called %d times, want never", got)
	}
}

// TestRouterBoundsAStepAnswersHeader runs a step whose answer's header never ends: the router
// stops reading it at stepclient.MaxAnswerHeaderBytes and answers 502, without retrying, instead of
// holding it all, whatever the body's size.
func TestRouterBoundsAStepAnswersHeader(t *testing.T) {
	for _, size := range []int{2, 1 << 20} {
		t.Run(strconv.Itoa(size)+" bytes", func(t *testing.T) {
			var sent atomic.Int64
			s := newRawStep(t, func(c net.Conn, br *bufio.Reader) {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				// A small send buffer: what the step got out is what the router's side took.
				_ = c.(*net.TCPConn).SetWriteBuffer(64 << 10)
				if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\n"); err != nil {
					return
				}
				line := "X-Padding: " + strings.Repeat("p", 1000) + "\r\n"
				for sent.Load() < 64<<20 {
					n, err := io.WriteString(c, line)
					sent.Add(int64(n))
					if err != nil {
						return
					}
				}
			})
			tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "chatty", URL: s.url, Retries: 2}}})
			a := post(t, tr.url, "text/plain", strings.Repeat("x", size), nil)
			if a.status != http.StatusBadGateway {
				t.Fatalf("answer %d, want 502", a.status)
			}
			if e := a.errorBody(t); e.Reason != ReasonResponseTooLarge {
				t.Errorf("reason %q, want %q", e.Reason, ReasonResponseTooLarge)
			}
			if got := s.conns.Load(); got != 1 {
				t.Errorf("%d calls, want 1: a step that answers too much is not asked again", got)
			}
			// What the step got out before the router closed the connection: what the router
			// read, plus what the sockets' buffers hold.
			if got := sent.Load(); got >= 4*stepclient.MaxAnswerHeaderBytes {
				t.Errorf("the step sent %d bytes of header before the router stopped reading", got)
			}
		})
	}
}
