package router

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// Defaults of the Server's limits on callers.
const (
	// DefaultMaxInFlight is how many requests the router serves at once when
	// Server.MaxInFlight is 0; more are answered 503 with Retry-After: 1.
	DefaultMaxInFlight = 1024
	// DefaultMinBodyRate is how many bytes of its body a caller must send per 10 s, after the
	// first second, when Server.MinBodyRate is 0: 64 KiB.
	DefaultMinBodyRate = 64 << 10
)

// The body rate is measured over bodyRateWindow after a grace of bodyRateGrace: a caller
// must have sent n × MinBodyRate bytes by bodyRateGrace + (n+1) × bodyRateWindow.
const (
	bodyRateWindow = 10 * time.Second
	bodyRateGrace  = time.Second
)

// errBodyTooSlow is a request body that did not arrive at the minimum rate.
var errBodyTooSlow = errors.New("the request body arrived slower than the minimum rate")

// guard is the handler in front of the router: it caps the requests in flight, cuts request
// bodies that arrive too slowly and bounds how long writing an answer may take, so that slow
// or idle callers cannot hold the router's memory or connections.
type guard struct {
	router       *Router
	maxInFlight  int64
	minBodyRate  int64 // bytes per window; 0 disables the check
	window       time.Duration
	grace        time.Duration
	writeTimeout time.Duration
	inFlight     atomic.Int64
}

// guarded is one request's guards, allocated together.
type guarded struct {
	w guardedWriter
	b guardedBody
}

func (g *guard) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if g.inFlight.Add(1) > g.maxInFlight {
		start := time.Now()
		g.inFlight.Add(-1)
		id := requestID(req.Header)
		w.Header()[config.HeaderRequestID] = []string{id}
		g.router.metrics.answered(writeError(w, http.StatusServiceUnavailable, errorBody{
			Error: "the router serves as many requests as it may at once", RequestID: id}), start)
		return
	}
	defer g.inFlight.Add(-1)
	now := time.Now()
	rc := http.NewResponseController(w)
	// A deadline left on the connection by its previous answer does not apply to this one.
	_ = rc.SetWriteDeadline(time.Time{})
	gd := &guarded{w: guardedWriter{ResponseWriter: w, rc: rc, timeout: g.writeTimeout}}
	if g.minBodyRate > 0 && req.Body != nil && req.Body != http.NoBody {
		gd.b = guardedBody{body: req.Body, rc: rc, start: now, g: g}
		req.Body = &gd.b
	}
	g.router.ServeHTTP(&gd.w, req)
}

// guardedWriter starts the write timeout when the answer starts.
type guardedWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	armed   bool
}

func (w *guardedWriter) arm() {
	if !w.armed {
		w.armed = true
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

// WriteHeader starts the write timeout and writes the status.
func (w *guardedWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

// Write writes the answer, under the write timeout.
func (w *guardedWriter) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

// Unwrap is the server's writer, for http.ResponseController.
func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// guardedBody reads a request body under a read deadline that moves with the bytes received:
// the caller must keep to the minimum rate, and finish within config.BodyReadTimeout.
type guardedBody struct {
	body     io.ReadCloser
	rc       *http.ResponseController
	g        *guard
	start    time.Time
	deadline time.Time
	read     int64
}

// Read reads the body, failing with errBodyTooSlow once the caller falls behind.
func (b *guardedBody) Read(p []byte) (int, error) {
	deadline := b.g.bodyDeadline(b.start, b.read)
	if !deadline.Equal(b.deadline) {
		b.deadline = deadline
		_ = b.rc.SetReadDeadline(deadline)
	}
	n, err := b.body.Read(p)
	b.read += int64(n)
	var nerr net.Error
	if err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &nerr) && nerr.Timeout())) {
		return n, fmt.Errorf("%w: %d bytes in %s: %w", errBodyTooSlow, b.read,
			time.Since(b.start).Round(time.Millisecond), err)
	}
	return n, err
}

// bodyDeadline is when the rest of a body that started at start, read bytes of it received,
// must have arrived: after the grace and one window, one more window per minBodyRate bytes
// received, and config.BodyReadTimeout after start at the latest. The time owed is bounded before it
// is a Duration: at a tiny rate, a large body's would not fit in one.
func (g *guard) bodyDeadline(start time.Time, read int64) time.Time {
	owed := min(float64(read)/float64(g.minBodyRate)*float64(g.window), float64(config.BodyReadTimeout))
	return start.Add(min(g.grace+g.window+time.Duration(owed), config.BodyReadTimeout))
}

// Close closes the body.
func (b *guardedBody) Close() error { return b.body.Close() }
