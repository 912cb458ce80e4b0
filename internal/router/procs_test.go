package router

import (
	"context"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestProcsFollowRequestsInFlight(t *testing.T) {
	var got []bool
	p := &procs{set: func(one bool) { got = append(got, one) }}
	steps := []struct {
		what string
		do   func()
	}{
		{"a window without requests: one processor", p.tick},
		{"one request at a time: still one", func() { p.started(1); p.started(1); p.tick() }},
		{"a second request in flight: the default, at once", func() { p.started(2) }},
		{"a third: nothing more to do", func() { p.started(3) }},
		{"the tick after a window with two in flight: still the default", p.tick},
		{"a window with one at most: one again", func() { p.started(1); p.tick() }},
	}
	want := []bool{true, false, true}
	for _, s := range steps {
		s.do()
		t.Logf("%s: %v", s.what, got)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("applied %v, want %v", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.run(ctx)
	if want = append(want, false); !slices.Equal(got, want) {
		t.Fatalf("after the end: applied %v, want %v (the default back)", got, want)
	}
}

// TestServerAdaptsProcs checks the real scheduler: one processor while the router is idle or
// serves one request at a time, the default as soon as two are in flight, and the default
// back when it stops.
func TestServerAdaptsProcs(t *testing.T) {
	if newProcs() == nil {
		t.Skip("GOMAXPROCS is set, or the machine has one processor")
	}
	defaultProcs := runtime.GOMAXPROCS(0)
	release := make(chan struct{})
	var hold atomic.Bool
	var once sync.Once
	slow := newStep(t, func(w http.ResponseWriter, _ *http.Request) {
		if hold.Load() {
			<-release
		}
		_, _ = w.Write([]byte(`{}`))
	})
	s := serveRouterWith(t, Config{Pipeline: "p", Steps: []Step{{Name: "a", URL: slow.URL}}},
		func(s *Server) { s.AdaptProcs = true })
	// Registered last, run first: the held calls end before the servers are stopped.
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	post(t, s.url, "application/json", `{}`, nil)
	eventually(t, "one processor while idle", func() bool { return runtime.GOMAXPROCS(0) == 1 })

	hold.Store(true)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if res, err := http.Post(s.url, "application/json", strings.NewReader(`{}`)); err == nil {
				_ = res.Body.Close()
			}
		})
	}
	eventually(t, "the default number of processors with two requests in flight",
		func() bool { return runtime.GOMAXPROCS(0) == defaultProcs })
	once.Do(func() { close(release) })
	wg.Wait()

	s.stop()
	<-s.done
	if n := runtime.GOMAXPROCS(0); n != defaultProcs {
		t.Errorf("GOMAXPROCS %d after the server stopped, want the default %d", n, defaultProcs)
	}
}
