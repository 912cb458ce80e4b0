package router

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// traceHeaders are passed on to every step whatever propagateHeaders says (W3C Trace Context
// and Baggage).
var traceHeaders = []string{"Traceparent", "Tracestate", "Baggage"}

// propagatedHeaderNames is the canonical names of the headers passed on to the steps (extra
// holds none the router sets itself: config.Validate refuses them).
func propagatedHeaderNames(extra []string) []string {
	names := append([]string(nil), traceHeaders...)
	for _, h := range extra {
		if c := http.CanonicalHeaderKey(h); !slices.Contains(names, c) {
			names = append(names, c)
		}
	}
	return names
}

// maxRequestIDLength is the longest X-Request-Id of a caller the router keeps.
const maxRequestIDLength = 128

// requestID is the caller's X-Request-Id when it is one the router may pass on (see
// validRequestID), else a new one: a caller that sent none, or one of another form, gets the
// router's.
func requestID(h http.Header) string {
	if id := h.Get(config.HeaderRequestID); validRequestID(id) {
		return id
	}
	return newRequestID()
}

// validRequestID reports whether a caller's request id is kept: 1 to maxRequestIDLength
// characters, each a letter, a digit or one of "._:-" (a UUID, a ULID, a trace or span id, a
// "<host>:<counter>"). The id goes back in the answer's header and error body, to every step
// and into the router's log, so nothing that could be read as markup, a quote, a separator
// of a header or log line, or a control character is kept, and a caller cannot make each of
// those copies long.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// newRequestID is a random (version 4) UUID. It identifies a request in logs and traces and
// needs no cryptographic strength, so it comes from the runtime's fast generator rather than
// from a system call per request.
func newRequestID() string {
	hi, lo := rand.Uint64(), rand.Uint64()
	hi = hi&^0xf000 | 0x4000     // version 4
	lo = lo&^(0xc<<60) | 0x8<<60 // RFC 9562 variant
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", hi>>32, hi>>16&0xffff, hi&0xffff, lo>>48, lo&0xffffffffffff)
}

// stepHeaders is the header set every step call of one request starts from.
func stepHeaders(in http.Header, names []string, id string) http.Header {
	out := make(http.Header, len(names)+3)
	for _, n := range names {
		if v := in[n]; len(v) > 0 {
			out[n] = v
		}
	}
	out[config.HeaderRequestID] = []string{id}
	if out["User-Agent"] == nil {
		// The router's own, unless propagateHeaders passes the caller's on.
		out["User-Agent"] = []string{"pipeline-router"}
	}
	return out
}

// answerHeader reports whether a header of the last step's answer goes back to the caller: not
// a hop-by-hop header (those of RFC 9110 section 7.6.1, every Proxy-* header, and those the
// answer's Connection header names), nor one the router sets itself.
func answerHeader(name string, connection []string) bool {
	if config.HopByHopHeader(name) {
		return false
	}
	switch name {
	case "Content-Length", config.HeaderRequestID, config.HeaderLastStep:
		return false
	}
	for _, v := range connection {
		for f := range strings.SplitSeq(v, ",") {
			if http.CanonicalHeaderKey(strings.TrimSpace(f)) == name {
				return false
			}
		}
	}
	return true
}

// copyAnswerHeaders sets on dst the headers of a step's answer that go back to the caller.
func copyAnswerHeaders(dst, src http.Header) {
	connection := src["Connection"]
	for k, v := range src {
		if answerHeader(k, connection) {
			dst[k] = v
		}
	}
}
