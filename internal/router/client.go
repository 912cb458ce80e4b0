package router

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
)

const (
	// directBodyLimit is the largest body a step is sent over a plain HTTP connection on the
	// request's own goroutine: the whole request is written, then the answer read. A larger
	// body, or an https step, goes through net/http's Transport, which reads the answer while
	// it writes (a step may start answering a large body before it has read it all).
	directBodyLimit = 64 << 10
	// maxIdlePerStep is how many idle connections to one step are kept for the next calls.
	maxIdlePerStep = 1024
	// idleConnTimeout closes a connection nobody used for that long.
	idleConnTimeout = 90 * time.Second
	// maxInformational is how many informational (1xx) answers before the final one are
	// skipped; a step that sends more is answered for as a broken connection.
	maxInformational = 5
	// maxAnswerHeaderBytes bounds what a step's answer header takes, with the informational
	// answers before it: the bound the router's server sets on a caller's request header.
	maxAnswerHeaderBytes = http.DefaultMaxHeaderBytes
)

// errAnswerHeaderTooLarge is a step's answer whose header goes on past maxAnswerHeaderBytes.
var errAnswerHeaderTooLarge = fmt.Errorf("the answer's header exceeds %d bytes", maxAnswerHeaderBytes)

// stepClient calls steps. A small body to a plain HTTP step is written and its answer read on
// the request's goroutine over a kept-alive connection: one HTTP exchange costs the router a
// write and a read (and a peek at a kept connection) and no hand-over between goroutines.
// Everything else goes through net/http.
type stepClient struct {
	dialer    net.Dialer
	transport *http.Client

	mu    sync.Mutex
	idle  map[string][]*clientConn // by host:port, the most recently used last
	sweep *time.Timer
}

// target is where a step is called, parsed once.
type target struct {
	url string
	// direct is true for an http URL: small bodies go over the client's own connections.
	direct bool
	// addr is host:port to dial; host the Host header (see hostHeader); path the request target.
	addr, host, path string
}

func newTarget(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, err
	}
	t := target{url: raw, direct: u.Scheme == "http", host: hostHeader(u), path: u.RequestURI()}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	t.addr = net.JoinHostPort(u.Hostname(), port)
	return t, nil
}

// hostHeader is the Host header of the calls to u: its host and port, an absolute name without
// its trailing dot. The step is dialled by the absolute name (the operator names a step's
// Service <service>.<namespace>.svc.<domain>., so that no DNS search domain is tried first),
// and the header names it as a client given the name without the dot would: virtual hosts and
// proxies in front of a step (a service mesh's, an nginx server_name) match it as they always did.
func hostHeader(u *url.URL) string {
	h := u.Hostname()
	if !strings.HasSuffix(h, ".") {
		return u.Host
	}
	h = strings.TrimSuffix(h, ".")
	if p := u.Port(); p != "" {
		return net.JoinHostPort(h, p)
	}
	return h
}

func newStepClient() *stepClient {
	// One dialer for both ways of calling a step; proxy settings of the environment are not
	// read: steps are called directly.
	c := &stepClient{
		dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second},
		idle:   map[string][]*clientConn{},
	}
	c.transport = &http.Client{
		Transport: &http.Transport{
			DialContext:            c.dialer.DialContext,
			MaxIdleConns:           4096,
			MaxIdleConnsPerHost:    maxIdlePerStep,
			IdleConnTimeout:        idleConnTimeout,
			TLSHandshakeTimeout:    10 * time.Second,
			ExpectContinueTimeout:  time.Second,
			DisableCompression:     true,
			MaxResponseHeaderBytes: maxAnswerHeaderBytes,
		},
		// A redirect is an answer like any other: the router does not follow it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// post sends in to t with header, under ctx and within timeout, and returns the step's final
// answer. The answer's body must be closed; until then ctx and the timeout still apply.
func (c *stepClient) post(ctx context.Context, t *target, timeout time.Duration, header http.Header, in payload) (*http.Response, error) {
	if t.direct && in.body.Len() <= directBodyLimit {
		return c.postDirect(ctx, t, timeout, header, in)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	req, err := newBodyRequest(actx, t.url, in.body)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header = header.Clone()
	req.Host = t.host
	if in.contentType != "" {
		req.Header["Content-Type"] = []string{in.contentType}
	}
	if in.contentEncoding != "" {
		req.Header["Content-Encoding"] = []string{in.contentEncoding}
	}
	if in.inferenceHeader != "" {
		req.Header[oip.HeaderInferenceHeaderLength] = []string{in.inferenceHeader}
	}
	res, err := c.transport.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	res.Body = &cancelBody{ReadCloser: res.Body, cancel: cancel}
	return res, nil
}

// cancelBody ends its request's context when it is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// clientConn is a connection to a step, with its buffers.
type clientConn struct {
	// addr is the step's host:port the connection was made to.
	addr string
	conn net.Conn
	// br reads conn through limit, which bounds an answer's header while it is read.
	br     *bufio.Reader
	limit  readLimit
	bw     *bufio.Writer
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

func (c *stepClient) postDirect(ctx context.Context, t *target, timeout time.Duration, header http.Header, in payload) (*http.Response, error) {
	// The connection's deadline is the step's timeout; ctx's own deadline, like the caller going
	// away, ends the exchange through ctx, so that the error is told apart by ctx's state.
	deadline := time.Now().Add(timeout)
	cc, err := c.get(ctx, t.addr, deadline)
	if err != nil {
		return nil, err
	}
	if err := cc.conn.SetDeadline(deadline); err != nil {
		_ = cc.conn.Close()
		return nil, err
	}
	// ctx ending ends the exchange at once; the connection is not used again.
	stop := context.AfterFunc(ctx, func() { _ = cc.conn.SetDeadline(aLongTimeAgo) })
	res, err := cc.exchange(t, header, in)
	if err != nil {
		stop()
		_ = cc.conn.Close()
		return nil, err
	}
	res.Body = &connBody{body: res.Body, cc: cc, client: c, stop: stop,
		reusable: !res.Close && res.StatusCode != http.StatusSwitchingProtocols}
	return res, nil
}

// exchange writes one request and reads the final answer's header.
func (cc *clientConn) exchange(t *target, header http.Header, in payload) (*http.Response, error) {
	w := cc.bw
	_, _ = w.WriteString("POST ")
	_, _ = w.WriteString(t.path)
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(t.host)
	_, _ = w.WriteString("\r\nContent-Length: ")
	_, _ = w.WriteString(strconv.FormatInt(in.body.Len(), 10))
	_, _ = w.WriteString("\r\n")
	for name, values := range header {
		for _, v := range values {
			if err := writeHeaderLine(w, name, v); err != nil {
				return nil, err
			}
		}
	}
	for _, h := range [...]struct{ name, value string }{
		{"Content-Type", in.contentType}, {"Content-Encoding", in.contentEncoding}, {oip.HeaderInferenceHeaderLength, in.inferenceHeader},
	} {
		if h.value != "" {
			if err := writeHeaderLine(w, h.name, h.value); err != nil {
				return nil, err
			}
		}
	}
	_, _ = w.WriteString("\r\n")
	if _, err := in.body.WriteTo(w); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	cc.limit.left = maxAnswerHeaderBytes
	for informational := 0; ; informational++ {
		res, err := http.ReadResponse(cc.br, nil)
		if err != nil {
			return nil, err
		}
		// 100 Continue, 103 Early Hints and the like come before the answer; 101 is final.
		if res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols {
			cc.limit.left = -1
			return res, nil
		}
		if informational == maxInformational {
			return nil, fmt.Errorf("more than %d informational answers", maxInformational)
		}
	}
}

// writeHeaderLine writes one header field, refusing a name or value that would break the
// request's framing.
func writeHeaderLine(w *bufio.Writer, name, value string) error {
	if !httpguts.ValidHeaderFieldName(name) {
		return fmt.Errorf("invalid header field name %q", name)
	}
	if !httpguts.ValidHeaderFieldValue(value) {
		return fmt.Errorf("invalid header field value for %q", name)
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
	client   *stepClient
	stop     func() bool
	reusable bool
	eof      bool
	closed   bool
}

func (b *connBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == io.EOF {
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

// get is an idle connection to addr that is still open, or a new one.
func (c *stepClient) get(ctx context.Context, addr string, deadline time.Time) (*clientConn, error) {
	now := time.Now()
	c.mu.Lock()
	for conns := c.idle[addr]; len(conns) > 0; conns = c.idle[addr] {
		cc := conns[len(conns)-1]
		conns[len(conns)-1] = nil
		c.idle[addr] = conns[:len(conns)-1]
		c.mu.Unlock()
		if now.Sub(cc.idleAt) < idleConnTimeout && connAlive(cc.conn) {
			return cc, nil
		}
		_ = cc.conn.Close()
		c.mu.Lock()
	}
	c.mu.Unlock()
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := c.dialer.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	conn = newRawConn(conn)
	cc := &clientConn{addr: addr, conn: conn, limit: readLimit{r: conn, left: -1}, bw: bufio.NewWriter(conn)}
	cc.br = bufio.NewReader(&cc.limit)
	return cc, nil
}

// put keeps cc for the next call to its step, up to maxIdlePerStep.
func (c *stepClient) put(cc *clientConn) {
	cc.idleAt = time.Now()
	addr := cc.addr
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle[addr]) >= maxIdlePerStep {
		_ = cc.conn.Close()
		return
	}
	c.idle[addr] = append(c.idle[addr], cc)
	if c.sweep == nil {
		c.sweep = time.AfterFunc(idleConnTimeout, c.closeIdle)
	}
}

// closeIdle closes the connections idle for idleConnTimeout, and looks again later while any
// are kept.
func (c *stepClient) closeIdle() {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep = nil
	for addr, conns := range c.idle {
		// The oldest first: conns is in the order they were put back.
		n := 0
		for n < len(conns) && now.Sub(conns[n].idleAt) >= idleConnTimeout {
			_ = conns[n].conn.Close()
			n++
		}
		if n == len(conns) {
			delete(c.idle, addr)
			continue
		}
		c.idle[addr] = append(conns[:0], conns[n:]...)
	}
	if len(c.idle) > 0 {
		c.sweep = time.AfterFunc(idleConnTimeout, c.closeIdle)
	}
}
