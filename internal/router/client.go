package router

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
)

const (
	// maxIdlePerStep is how many idle connections to one step are kept for the next calls.
	maxIdlePerStep = 1024
	// idleConnTimeout closes a connection nobody used for that long.
	idleConnTimeout = 90 * time.Second
	// maxAnswerHeaderBytes bounds what a step's answer header takes, with the informational
	// answers before it: the bound the router's server sets on a caller's request header.
	maxAnswerHeaderBytes = http.DefaultMaxHeaderBytes
)

// stepClient calls steps through net/http's Transport, whatever the body's size or the
// step's scheme. The Transport frames every request and answer; it refuses an answer of
// differing Content-Lengths, closes a connection after an HTTP/1.0 answer without keep-alive
// and one on which bytes come that no request asked for, and sends a request again on
// another connection when a kept one ended before any byte of it was written
// (desync_test.go).
type stepClient struct {
	http *http.Client
}

// target is where a step is called, parsed once.
type target struct {
	url string
	// host is the Host header (see hostHeader).
	host string
}

func newTarget(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, err
	}
	return target{url: raw, host: hostHeader(u)}, nil
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

// newStepClient is a client that dials with dial (a net.Dialer's when nil). Proxy settings of
// the environment are not read: steps are called directly.
func newStepClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *stepClient {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return &stepClient{http: &http.Client{
		Transport: &http.Transport{
			DialContext:            dial,
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
	}}
}

// post sends in to t with header, under ctx and within timeout, and returns the step's final
// answer. The answer's body must be closed; until then ctx and the timeout still apply.
func (c *stepClient) post(ctx context.Context, t *target, timeout time.Duration, header http.Header, in payload) (*http.Response, error) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	req, err := newBodyRequest(actx, t.url, in.body)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header = stepRequestHeader(header, in)
	req.Host = t.host
	res, err := c.http.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	res.Body = &cancelBody{ReadCloser: res.Body, cancel: cancel}
	return res, nil
}

// stepRequestHeader is the header of a call to a step: header without the fields that frame a
// message or belong to one connection (RFC 9110 section 7.6.1, every Proxy-* field) and
// without those the body sets, then the body's own. Whatever a caller or a configuration
// passed on, the Transport alone frames the request.
func stepRequestHeader(header http.Header, in payload) http.Header {
	out := make(http.Header, len(header)+3)
	for name, values := range header {
		if !framingHeader(name) {
			out[name] = values
		}
	}
	for _, h := range [...]struct{ name, value string }{
		{"Content-Type", in.contentType}, {"Content-Encoding", in.contentEncoding}, {oip.HeaderInferenceHeaderLength, in.inferenceHeader},
	} {
		if h.value != "" {
			out[h.name] = []string{h.value}
		}
	}
	return out
}

// framingHeader reports whether the field named name frames a message or belongs to one
// connection, or describes a body (which the router sets from the body it sends).
func framingHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host",
		"Content-Length", "Content-Type", "Content-Encoding", "Expect", oip.HeaderInferenceHeaderLength:
		return true
	}
	return strings.HasPrefix(http.CanonicalHeaderKey(name), "Proxy-")
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
