package router

import (
	"net/http"
	"regexp"
	"slices"
	"sync"
	"testing"
)

func TestNewRequestIDIsAVersion4UUID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := newRequestID()
		if !re.MatchString(id) {
			t.Fatalf("%q is not a version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("%q generated twice", id)
		}
		seen[id] = true
	}
}

func TestRouterSendsItsUserAgentUnlessTheCallersIsPassedOn(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	s := newStep(t, func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("User-Agent"))
	})
	plain := newTestRouter(t, Config{Steps: []Step{{Name: "one", URL: s.URL}}})
	passing := newTestRouter(t, Config{Steps: []Step{{Name: "one", URL: s.URL}}, PropagateHeaders: []string{"user-agent"}})
	caller := http.Header{"User-Agent": {"face-client/2"}}
	for _, url := range []string{plain.url, passing.url} {
		if a := post(t, url, "text/plain", "in", caller); a.status != http.StatusOK {
			t.Fatalf("answer %d %q", a.status, a.body)
		}
	}
	if a := post(t, passing.url, "text/plain", "in", http.Header{"User-Agent": {""}}); a.status != http.StatusOK {
		t.Fatalf("answer %d %q", a.status, a.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"pipeline-router", "face-client/2", "pipeline-router"}; !slices.Equal(got, want) {
		t.Errorf("the step saw User-Agent %q, want %q", got, want)
	}
}
