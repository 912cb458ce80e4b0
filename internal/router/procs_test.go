package router

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestProcsFollowRequestsInFlight(t *testing.T) {
	var (
		got      []bool
		inFlight int64
	)
	p := &procs{inFlight: func() int64 { return inFlight }, set: func(one bool) { got = append(got, one) }}
	start := func(n int64) { inFlight = n; p.started(n) }
	steps := []struct {
		what string
		do   func()
	}{
		{"a window without requests: one processor", p.tick},
		{"one request at a time: still one", func() { start(1); inFlight = 0; start(1); p.tick() }},
		{"a second request in flight: the default, at once", func() { start(2) }},
		{"a third: nothing more to do", func() { start(3) }},
		{"the tick after a window with two in flight: still the default", p.tick},
		{"two still in flight, none started since: still the default", func() { inFlight = 2; p.tick() }},
		{"a window with one at most: one again", func() { inFlight = 0; start(1); p.tick() }},
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

// TestProcsTickMeetingASecondRequest plays a second request that starts while a tick decides
// on one processor: it finds the default still in place and leaves it, so the tick, seeing it
// in flight, goes back to the default.
func TestProcsTickMeetingASecondRequest(t *testing.T) {
	var got []bool
	var p *procs
	calls := 0
	p = &procs{set: func(one bool) { got = append(got, one) }, inFlight: func() int64 {
		calls++
		if calls == 1 {
			// The tick's first look: one request. The second starts now, before the switch.
			p.started(2)
			return 1
		}
		return 2
	}}
	p.started(1)
	p.tick()
	if want := []bool{true, false}; !slices.Equal(got, want) {
		t.Fatalf("applied %v, want %v: the default back with two requests in flight", got, want)
	}
}

// TestServerAdaptsProcs checks the real scheduler: one processor while the router is idle or
// serves one request at a time, the default as soon as two are in flight, and the default
// back when it stops.
func TestServerAdaptsProcs(t *testing.T) {
	if newProcs(func() int64 { return 0 }) == nil {
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

// TestServerKeepsTheDefaultWhileLongRequestsRun holds two requests in flight for three windows
// with no new one: the scheduler keeps its default number of processors.
func TestServerKeepsTheDefaultWhileLongRequestsRun(t *testing.T) {
	if newProcs(func() int64 { return 0 }) == nil {
		t.Skip("GOMAXPROCS is set, or the machine has one processor")
	}
	defaultProcs := runtime.GOMAXPROCS(0)
	release, entered := make(chan struct{}), make(chan struct{}, 2)
	var once sync.Once
	slow := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		entered <- struct{}{}
		<-release
		_, _ = w.Write([]byte(`{}`))
	})
	s := serveRouterWith(t, Config{Pipeline: "p", Steps: []Step{{Name: "a", URL: slow.URL}}},
		func(s *Server) { s.AdaptProcs = true })
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if res, err := http.Post(s.url, "application/json", strings.NewReader(`{}`)); err == nil {
				_ = res.Body.Close()
			}
		})
	}
	<-entered
	<-entered
	eventually(t, "the default number of processors with two requests in flight",
		func() bool { return runtime.GOMAXPROCS(0) == defaultProcs })
	// Both requests stay in flight; no new one arrives for three windows.
	time.Sleep(3 * procsWindow)
	got := runtime.GOMAXPROCS(0)
	once.Do(func() { close(release) })
	wg.Wait()
	if got != defaultProcs {
		t.Fatalf("GOMAXPROCS %d with two requests still in flight, want the default %d", got, defaultProcs)
	}
}
