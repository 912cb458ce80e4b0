// Package stepclient is the router's client to its steps: it sends a body to a step and reads
// the step's answer, over HTTP/1.1 connections it keeps for the next calls. A small body to a
// plain HTTP step goes on a direct exchange of its own (directconn.go), the rest through
// net/http's Transport. It frames every request itself and makes none twice but what never
// reached the step; the router's engine decides on retries, and reads the answers.
package stepclient

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
)

const (
	// maxIdlePerStep is how many idle connections to one step are kept for the next calls: as
	// many as the calls the router serves at once by default (router.DefaultMaxInFlight), so
	// that a step called by all of them keeps its connections through a burst.
	maxIdlePerStep = 1024
	// maxIdleConns is how many idle connections to all steps each path keeps (the direct
	// path's pool and the Transport's): four steps' full bursts. A pipeline may have
	// config.MaxSteps steps, each called in bursts of its own, and every idle connection holds
	// a descriptor and 8 KiB of buffers (and, in the Transport, two goroutines): whatever the
	// steps' number, the two paths keep at most 8192 descriptors and 64 MiB of buffers.
	maxIdleConns = 4096
	// idleConnTimeout closes a connection nobody used for that long.
	idleConnTimeout = 90 * time.Second
	// MaxAnswerHeaderBytes bounds what a step's answer header takes, with the informational
	// answers before it: the bound the router's server sets on a caller's request header.
	MaxAnswerHeaderBytes = http.DefaultMaxHeaderBytes
)

// Client calls steps. A small body to a plain HTTP step goes on the direct path
// (directconn.go) where connAlive can look into a kept connection; everything else through
// net/http's Transport. Both frame requests and answers alike: they refuse an answer of
// differing Content-Lengths, close a connection after an HTTP/1.0 answer without keep-alive
// and one on which bytes come that no request asked for, and send a request again on another
// connection when a kept one ended before any byte of it was written (desync_test.go, here
// and in internal/router, which runs the same cases through the whole router).
type Client struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	http *http.Client

	// The direct path's idle connections (directconn.go).
	mu   sync.Mutex
	idle map[string][]*clientConn // by host:port, the most recently used last
	// idleConns counts the connections in idle, at most maxIdleConns.
	idleConns int
	// sweepDue is true while a sweep (closeIdle) is scheduled.
	sweepDue bool
	// now and afterFunc are the idle pool's clock: time.Now and time.AfterFunc, a test's own.
	now       func() time.Time
	afterFunc func(time.Duration, func())
}

// Target is where a step is called, parsed once.
type Target struct {
	url string
	// direct is true for an http URL where connAlive works: small bodies take the direct path.
	direct bool
	// addr is host:port to dial; host the Host header (see hostHeader); path the request target.
	addr, host, path string
}

// NewTarget is the target of a step's URL.
func NewTarget(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, err
	}
	t := Target{url: raw, direct: u.Scheme == "http" && connAliveWorks, host: hostHeader(u), path: u.RequestURI()}
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

// New is a client that dials with dial (a net.Dialer's when nil). Proxy settings of the
// environment are not read: steps are called directly.
func New(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Client {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return &Client{dial: dial, idle: map[string][]*clientConn{}, now: time.Now, afterFunc: afterFunc, http: &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &countedConn{Conn: conn}, nil
			},
			MaxIdleConns:           maxIdleConns,
			MaxIdleConnsPerHost:    maxIdlePerStep,
			IdleConnTimeout:        idleConnTimeout,
			TLSHandshakeTimeout:    10 * time.Second,
			ExpectContinueTimeout:  time.Second,
			DisableCompression:     true,
			MaxResponseHeaderBytes: MaxAnswerHeaderBytes,
		},
		// A redirect is an answer like any other: the router does not follow it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Payload is what a call sends: a body and the fields that describe it, which the client
// writes as the request's own whatever the header passed with it says.
type Payload struct {
	Body        *bodies.Buffer
	ContentType string
	// ContentEncoding is the body's Content-Encoding, passed on with it (the router neither
	// decodes nor encodes bodies).
	ContentEncoding string
	// InferenceHeader is the body's Inference-Header-Content-Length (the Open Inference
	// Protocol's binary data extension), passed on with it.
	InferenceHeader string
}

// Post sends in to t with header, under ctx and within timeout, and returns the step's final
// answer. The answer's body must be closed; until then ctx and the timeout still apply. in's
// body stays the caller's: the client reads it, and holds its blocks while a request still
// does, but never releases it.
func (c *Client) Post(ctx context.Context, t *Target, timeout time.Duration, header http.Header, in Payload) (*http.Response, error) {
	header = stepRequestHeader(header, in)
	if t.direct && in.Body.Len() <= directBodyLimit {
		return c.postDirect(ctx, t, timeout, header, in.Body)
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	for fresh := false; ; fresh = true {
		req, err := bodies.NewRequest(actx, t.url, in.Body)
		if err != nil {
			cancel()
			return nil, err
		}
		// The Transport must not send the body again by itself (it would, on a kept connection
		// that failed after the step got bytes of it, for a request it takes for replayable):
		// the router's retries decide that, by the step's idempotent; this loop resends only
		// what never reached the step.
		req.GetBody = nil
		req.Header = header
		req.Host = t.host
		// Which connection the Transport took, and what had been written to it: a kept one
		// that fails before the request's first byte reached it is left for another, once, as
		// on the direct path.
		var (
			conn    *countedConn
			written int64
			reused  bool
		)
		req = req.WithContext(httptrace.WithClientTrace(actx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			nc := info.Conn
			if tc, ok := nc.(*tls.Conn); ok {
				nc = tc.NetConn()
			}
			if cc, ok := nc.(*countedConn); ok {
				conn, written, reused = cc, cc.written.Load(), info.Reused
			}
		}}))
		res, err := c.http.Do(req)
		if err != nil {
			if !fresh && reused && conn.written.Load() == written && ctx.Err() == nil && actx.Err() == nil {
				continue
			}
			cancel()
			return nil, err
		}
		res.Body = &cancelBody{ReadCloser: res.Body, cancel: cancel}
		return res, nil
	}
}

// countedConn is a connection counting the bytes written to it: the Transport's connections,
// and the direct path's writer.
type countedConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// stepRequestHeader is the header of a call to a step: header without the fields that frame a
// message or belong to one connection (RFC 9110 section 7.6.1, every Proxy-* field) and
// without those the body sets, then the body's own. Whatever a caller or a configuration
// passed on, the client alone frames the request.
func stepRequestHeader(header http.Header, in Payload) http.Header {
	out := make(http.Header, len(header)+3)
	for name, values := range header {
		if !config.FramingHeader(http.CanonicalHeaderKey(name)) {
			out[name] = values
		}
	}
	for _, h := range [...]struct{ name, value string }{
		{"Content-Type", in.ContentType}, {"Content-Encoding", in.ContentEncoding}, {oip.HeaderInferenceHeaderLength, in.InferenceHeader},
	} {
		if h.value != "" {
			out[h.name] = []string{h.value}
		}
	}
	return out
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
