package stepclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
)

// The direct path: a small body to a plain HTTP step is written, and the answer's header read,
// on the request's own goroutine over a kept-alive connection of the client's own, with the
// net package's sockets. One exchange costs the router a write and a read, and a look at a
// kept connection before it is used again (connAlive), and no hand-over between goroutines,
// which net/http's Transport makes for each request (its connection's reading and writing
// goroutines). It frames requests and answers as the Transport does; desync_test.go (here and
// in internal/router) runs the same cases against both.

// directBodyLimit is the largest body sent on the direct path. A larger one goes through
// net/http's Transport, which reads the answer while it writes (a step may start answering a
// large body before it has read it all).
const directBodyLimit = 64 << 10

// errAnswerHeaderTooLarge is a step's answer whose header goes on past MaxAnswerHeaderBytes.
var errAnswerHeaderTooLarge = fmt.Errorf("the answer's header exceeds %d bytes", MaxAnswerHeaderBytes)

// AnswerHeaderTooLarge reports whether err is a step answer's header over
// MaxAnswerHeaderBytes: the direct path's error, or net/http's, which has no type of its own.
func AnswerHeaderTooLarge(err error) bool {
	return errors.Is(err, errAnswerHeaderTooLarge) || strings.Contains(err.Error(), "server response headers exceeded")
}

// clientConn is a connection to a step, with its buffers.
type clientConn struct {
	// addr is the step's host:port the connection was made to.
	addr string
	conn net.Conn
	// br reads conn through limit, which bounds an answer's header while it is read.
	br    *bufio.Reader
	limit readLimit
	// bw writes to conn through written, which counts the bytes that reached the socket.
	bw      *bufio.Writer
	written countedConn
	// reused is true for a connection kept from an earlier call.
	reused bool
	idleAt time.Time
}

// readLimit reads from r at most left more bytes, any number while left is negative.
type readLimit struct {
	r    io.Reader
	left int64
}

func (l *readLimit) Read(p []byte) (int, error) {
	if l.left < 0 {
		return l.r.Read(p)
	}
	if l.left == 0 {
		return 0, errAnswerHeaderTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// aLongTimeAgo, as a deadline, ends a blocked read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// postDirect sends in on the direct path. A kept connection that fails before any byte of the
// request reached it (the step closed it as the call began) is dropped and the request sent
// again on a new one, once, idempotent or not, as net/http's Transport does.
func (c *Client) postDirect(ctx context.Context, t *Target, timeout time.Duration, header http.Header, body *bodies.Buffer) (*http.Response, error) {
	// The connection's deadline is the step's timeout; ctx's own deadline, like the caller going
	// away, ends the exchange through ctx, so that the error is told apart by ctx's state.
	deadline := time.Now().Add(timeout)
	for fresh := false; ; fresh = true {
		cc, err := c.get(ctx, t.addr, deadline, fresh)
		if err != nil {
			return nil, err
		}
		if err := cc.conn.SetDeadline(deadline); err != nil {
			_ = cc.conn.Close()
			return nil, err
		}
		// ctx ending ends the exchange at once; the connection is not used again.
		stop := context.AfterFunc(ctx, func() { _ = cc.conn.SetDeadline(aLongTimeAgo) })
		res, err := cc.exchange(t, header, body)
		if err != nil {
			stop()
			_ = cc.conn.Close()
			var bad *headerFieldError
			if cc.reused && cc.written.written.Load() == 0 && !fresh && ctx.Err() == nil && !errors.As(err, &bad) {
				continue
			}
			return nil, err
		}
		res.Body = &connBody{body: res.Body, cc: cc, client: c, stop: stop,
			reusable: !res.Close && res.StatusCode != http.StatusSwitchingProtocols}
		return res, nil
	}
}

// exchange writes one request, with header (stepRequestHeader's: nothing in it frames the
// message) and body, and reads the final answer's header.
func (cc *clientConn) exchange(t *Target, header http.Header, body *bodies.Buffer) (*http.Response, error) {
	cc.written.written.Store(0)
	w := cc.bw
	_, _ = w.WriteString("POST ")
	_, _ = w.WriteString(t.path)
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(t.host)
	_, _ = w.WriteString("\r\nContent-Length: ")
	_, _ = w.WriteString(strconv.FormatInt(body.Len(), 10))
	_, _ = w.WriteString("\r\n")
	for name, values := range header {
		for _, v := range values {
			if err := writeHeaderLine(w, name, v); err != nil {
				return nil, err
			}
		}
	}
	_, _ = w.WriteString("\r\n")
	if _, err := body.WriteTo(w); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	// The bound covers the informational answers (100, 103, ...) and the final one's header,
	// as net/http's MaxResponseHeaderBytes does.
	cc.limit.left = MaxAnswerHeaderBytes
	for {
		res, err := http.ReadResponse(cc.br, nil)
		if err != nil {
			return nil, err
		}
		// 100 Continue, 103 Early Hints and the like come before the answer; 101 is final.
		// A status under 100 is final too, as net/http takes it (and the router refuses it).
		if res.StatusCode < 100 || res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols {
			cc.limit.left = -1
			return res, nil
		}
	}
}

// headerFieldError is a header field the request cannot carry: no connection would take it.
type headerFieldError struct{ msg string }

func (e *headerFieldError) Error() string { return e.msg }

// writeHeaderLine writes one header field, refusing a name or value that would break the
// request's framing.
func writeHeaderLine(w *bufio.Writer, name, value string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return &headerFieldError{fmt.Sprintf("invalid header field name %q", name)}
	}
	if !httpguts.ValidHeaderFieldValue(value) {
		return &headerFieldError{fmt.Sprintf("invalid header field value for %q", name)}
	}
	_, _ = w.WriteString(name)
	_, _ = w.WriteString(": ")
	_, _ = w.WriteString(value)
	_, _ = w.WriteString("\r\n")
	return nil
}

// connBody is an answer's body on a clientConn: read to its end and closed, it gives the
// connection back for the next call.
type connBody struct {
	body     io.ReadCloser
	cc       *clientConn
	client   *Client
	stop     func() bool
	reusable bool
	eof      bool
	closed   bool
}

func (b *connBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

// Close keeps the connection when the body was read to its end, the step did not ask to close
// it, nothing unread follows and the caller did not go away; otherwise it closes it.
func (b *connBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	canceled := !b.stop()
	if b.eof && b.reusable && !canceled && b.cc.br.Buffered() == 0 && b.cc.conn.SetDeadline(time.Time{}) == nil {
		b.client.put(b.cc)
		return nil
	}
	return b.cc.conn.Close()
}

// idleSweepSlack is how long past idleConnTimeout an idle connection may stay open. The sweep
// runs that long after the timeout of the connection idle longest and closes in one pass all
// those whose timeouts fell in between: it runs at most once per idleSweepSlack, however the
// connections' timeouts are spread.
const idleSweepSlack = idleConnTimeout / 16

// afterFunc runs f in its own goroutine after d: the idle pool's timer.
func afterFunc(d time.Duration, f func()) { time.AfterFunc(d, f) }

// get is an idle connection to addr that is still open (none when fresh), or a new one.
func (c *Client) get(ctx context.Context, addr string, deadline time.Time, fresh bool) (*clientConn, error) {
	c.mu.Lock()
	now := c.now()
	for conns := c.idle[addr]; !fresh && len(conns) > 0; conns = c.idle[addr] {
		cc := conns[len(conns)-1]
		conns[len(conns)-1] = nil
		// An emptied list stays, for the connection's return, until a sweep.
		c.idle[addr] = conns[:len(conns)-1]
		c.idleConns--
		c.mu.Unlock()
		if now.Sub(cc.idleAt) < idleConnTimeout && connAlive(cc.conn) {
			cc.reused = true
			return cc, nil
		}
		_ = cc.conn.Close()
		c.mu.Lock()
	}
	c.mu.Unlock()
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := c.dial(dctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cc := &clientConn{addr: addr, conn: conn, limit: readLimit{r: conn, left: -1}, written: countedConn{Conn: conn}}
	cc.br = bufio.NewReader(&cc.limit)
	cc.bw = bufio.NewWriter(&cc.written)
	return cc, nil
}

// put keeps cc for the next call to its step. Past maxIdlePerStep connections to the step, or
// maxIdleConns in all, it closes the one idle longest (of the step's, or of all), as net/http's
// Transport does past MaxIdleConns: cc was used last, and the oldest is the likeliest to be
// closed soon by the step's own idle timeout, which is often shorter than the router's.
func (c *Client) put(cc *clientConn) {
	addr := cc.addr
	c.mu.Lock()
	// Taken under the lock, idleAt grows along each list: its first is its oldest.
	cc.idleAt = c.now()
	var old *clientConn
	if len(c.idle[addr]) >= maxIdlePerStep {
		old = c.removeOldestLocked(addr)
	} else if c.idleConns >= maxIdleConns {
		old = c.removeOldestLocked(c.oldestAddrLocked())
	}
	c.idle[addr] = append(c.idle[addr], cc)
	c.idleConns++
	// A sweep already due runs no later than this connection's would: it was set for one put
	// back before (or since taken, which makes it early, never late).
	if !c.sweepDue {
		c.sweepDue = true
		c.afterFunc(idleConnTimeout+idleSweepSlack, c.closeIdle)
	}
	c.mu.Unlock()
	if old != nil {
		_ = old.conn.Close()
	}
}

// removeOldestLocked takes the connection idle longest out of addr's list, which is not empty.
func (c *Client) removeOldestLocked(addr string) *clientConn {
	conns := c.idle[addr]
	old := conns[0]
	n := copy(conns, conns[1:])
	conns[n] = nil
	c.idle[addr] = conns[:n]
	c.idleConns--
	return old
}

// oldestAddrLocked is the step whose connection was idle longest, of those that have any: a
// look at each step's first, only when maxIdleConns are kept.
func (c *Client) oldestAddrLocked() string {
	var oldest string
	var at time.Time
	for addr, conns := range c.idle {
		if len(conns) > 0 && (oldest == "" || conns[0].idleAt.Before(at)) {
			oldest, at = addr, conns[0].idleAt
		}
	}
	return oldest
}

// closeIdle closes the connections idle for idleConnTimeout and, while any are kept, runs again
// idleSweepSlack after the next one's timeout: a connection stays open at most that long past
// its own, with no timer of its own.
func (c *Client) closeIdle() {
	var expired []*clientConn
	c.mu.Lock()
	now := c.now()
	var next time.Time
	for addr, conns := range c.idle {
		// The oldest first: conns is in the order they were put back.
		n := 0
		for n < len(conns) && now.Sub(conns[n].idleAt) >= idleConnTimeout {
			n++
		}
		expired = append(expired, conns[:n]...)
		if n == len(conns) {
			delete(c.idle, addr)
			continue
		}
		if n > 0 {
			kept := copy(conns, conns[n:])
			clear(conns[kept:])
			conns = conns[:kept]
			c.idle[addr] = conns
		}
		if next.IsZero() || conns[0].idleAt.Before(next) {
			next = conns[0].idleAt
		}
	}
	c.idleConns -= len(expired)
	c.sweepDue = !next.IsZero()
	if c.sweepDue {
		c.afterFunc(next.Add(idleConnTimeout+idleSweepSlack).Sub(now), c.closeIdle)
	}
	c.mu.Unlock()
	for _, cc := range expired {
		_ = cc.conn.Close()
	}
}
