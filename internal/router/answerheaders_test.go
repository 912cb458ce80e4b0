package router

import (
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

func TestRouterGivesTheCallerTheLastStepsHeaders(t *testing.T) {
	first := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("X-Faces", "from the first step")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("faces"))
	})
	last := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		h := w.Header()
		h.Set("X-Faces", "2")
		h.Add("X-Label", "alice")
		h.Add("X-Label", "bob")
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", "11")
		h.Set("Connection", "X-Hop")
		h.Set("X-Hop", "for the router only")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Proxy-Authenticate", "Basic")
		h.Set("Upgrade", "h2c")
		h.Set(config.HeaderRequestID, "the step's own")
		h.Set(config.HeaderLastStep, "the step's own")
		_, _ = w.Write([]byte(`{"faces":2}`))
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "detect", URL: first.URL}, {Name: "recognise", URL: last.URL}}})
	a := post(t, tr.url, "text/plain", "picture", http.Header{config.HeaderRequestID: {"req-1"}})
	if a.status != http.StatusOK || a.body != `{"faces":2}` {
		t.Fatalf("answer %d %q", a.status, a.body)
	}
	want := map[string][]string{
		"X-Faces":              {"2"},
		"X-Label":              {"alice", "bob"},
		"Content-Type":         {"application/json"},
		"Content-Length":       {strconv.Itoa(len(a.body))},
		config.HeaderRequestID: {"req-1"},
		config.HeaderLastStep:  {"recognise"},
	}
	for k, v := range want {
		if got := a.header[k]; len(got) != len(v) || (len(v) > 0 && got[0] != v[0]) || (len(v) > 1 && got[1] != v[1]) {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"Cache-Control", "X-Hop", "Keep-Alive", "Proxy-Authenticate", "Upgrade"} {
		if got := a.header[k]; got != nil {
			t.Errorf("%s reached the caller: %q", k, got)
		}
	}
}

func TestRouterPassesAClientErrorsHeadersBack(t *testing.T) {
	limited := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("X-Quota", "exceeded")
		http.Error(w, "no quota", http.StatusForbidden)
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "limited", URL: limited.URL}}})
	a := post(t, tr.url, "", "in", nil)
	if a.status != http.StatusForbidden || a.header.Get("X-Quota") != "exceeded" {
		t.Fatalf("answer %d, X-Quota %q: want the step's 403 with its headers", a.status, a.header.Get("X-Quota"))
	}
}

func TestRouterPassesContentEncodingOnWithTheBody(t *testing.T) {
	var gotFirst, gotSecond atomic.Value
	first := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotFirst.Store(r.Header.Get("Content-Encoding") + " " + string(b))
		w.Header().Set("Content-Encoding", "br")
		_, _ = w.Write([]byte("brotli bytes"))
	})
	second := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotSecond.Store(r.Header.Get("Content-Encoding") + " " + string(b))
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write([]byte("gzip bytes"))
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "one", URL: first.URL}, {Name: "two", URL: second.URL}}})
	// Accept-Encoding is set so that the test's client does not decode the answer itself.
	a := post(t, tr.url, "application/octet-stream", "zstd bytes",
		http.Header{"Content-Encoding": {"zstd"}, "Accept-Encoding": {"gzip"}})
	if a.status != http.StatusOK || a.body != "gzip bytes" || a.header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("answer %d %q (Content-Encoding %q)", a.status, a.body, a.header.Get("Content-Encoding"))
	}
	if got := gotFirst.Load(); got != "zstd zstd bytes" {
		t.Errorf("the first step got %q, want the request's body with its Content-Encoding", got)
	}
	if got := gotSecond.Load(); got != "br brotli bytes" {
		t.Errorf("the second step got %q, want the first answer's body with its Content-Encoding", got)
	}
}
