package stepclient

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
)

// The cases that run the whole router against steps whose answers are framed oddly are in
// internal/router's desync_test.go: what it answers then is the router's.

// newStep is a step on a loopback address that h answers: its URL.
func newStep(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// bodyOf is a body holding b in one slice, as the router holds a body it read of that length
// and joined.
func bodyOf(t *testing.T, b []byte) *bodies.Buffer {
	t.Helper()
	n := int64(len(b))
	buf, err := bodies.Read(bytes.NewReader(b), n, n, bodies.NewBudget(2*n))
	if err == nil {
		err = buf.Join()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Release)
	return buf
}

// TestStepClientWritesNoFramingHeader passes the client headers that frame a message or belong
// to a connection: the request the step gets is framed by the client alone.
func TestStepClientWritesNoFramingHeader(t *testing.T) {
	for _, size := range []int{16, 1 << 20} {
		t.Run(strconv.Itoa(size)+" bytes", func(t *testing.T) {
			got := make(chan http.Header, 1)
			s := newStep(t, func(_ http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				h := r.Header.Clone()
				h.Set("X-Got-Length", strconv.Itoa(len(b)))
				got <- h
			})
			tg, err := NewTarget(s.URL)
			if err != nil {
				t.Fatal(err)
			}
			header := http.Header{
				"Connection": {"close, X-Trace"}, "Keep-Alive": {"timeout=1"}, "Transfer-Encoding": {"chunked"},
				"Content-Length": {"3"}, "Te": {"trailers"}, "Upgrade": {"websocket"}, "Proxy-Authorization": {"Basic eA=="},
				"Host": {"elsewhere"}, "Expect": {"100-continue"}, "X-Trace": {"kept"},
			}
			in := Payload{Body: bodyOf(t, []byte(strings.Repeat("x", size))), ContentType: "text/plain"}
			res, err := New(nil).Post(t.Context(), &tg, 10*time.Second, header, in)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			h := <-got
			for _, name := range []string{"Keep-Alive", "Transfer-Encoding", "Te", "Upgrade", "Proxy-Authorization", "Expect"} {
				if v := h[name]; v != nil {
					t.Errorf("the step got %s: %q", name, v)
				}
			}
			if h.Get("X-Got-Length") != strconv.Itoa(size) || h.Get("Content-Type") != "text/plain" || h.Get("X-Trace") != "kept" {
				t.Errorf("the step got %v", h)
			}
		})
	}
}

// TestStepClientSendsAgainWhenAKeptConnectionTookNothing makes the write on a kept
// connection fail before any byte of the request went out, as on a connection the step reset
// while it was idle: the request, though not idempotent, is sent again on a new connection.
func TestStepClientSendsAgainWhenAKeptConnectionTookNothing(t *testing.T) {
	for _, size := range []int{1, 1 << 20} {
		t.Run(strconv.Itoa(size)+" bytes", func(t *testing.T) {
			// The step reads the whole request before it answers: the connection's reads begin
			// once a request was written.
			s := newStep(t, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				_, _ = w.Write(b)
			})
			tg, err := NewTarget(s.URL)
			if err != nil {
				t.Fatal(err)
			}
			var dials atomic.Int32
			var d net.Dialer
			c := New(func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &failSecondRequest{Conn: conn, first: dials.Add(1) == 1}, nil
			})
			for i := range 2 {
				body := strings.Repeat(strconv.Itoa(i), size)
				res, err := c.Post(t.Context(), &tg, 10*time.Second, http.Header{}, Payload{Body: bodyOf(t, []byte(body))})
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				b, _ := io.ReadAll(res.Body)
				_ = res.Body.Close()
				if string(b) != body {
					t.Fatalf("call %d: answer of %d bytes", i, len(b))
				}
			}
			if got := dials.Load(); got != 2 {
				t.Errorf("%d connections, want 2", got)
			}
		})
	}
}

// failSecondRequest is a connection whose writes fail, nothing written, once its first request
// was answered: the second request's first write finds it reset.
type failSecondRequest struct {
	net.Conn
	first  bool
	writes atomic.Int32
	read   atomic.Bool
}

func (c *failSecondRequest) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.read.Store(true)
	}
	return n, err
}

func (c *failSecondRequest) Write(p []byte) (int, error) {
	if c.first && c.read.Load() {
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
	}
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// SyscallConn lets connAlive look into the connection, as into any TCP connection.
func (c *failSecondRequest) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}
