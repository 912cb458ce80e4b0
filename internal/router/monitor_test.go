package router

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestMonitorRunsWhileRequestsAreInFlight(t *testing.T) {
	var inFlight atomic.Int64
	m := newMonitor(inFlight.Load)
	if m.armed.Load() {
		t.Fatal("armed before any request")
	}
	inFlight.Add(1)
	m.started()
	m.started()
	time.Sleep(5 * monitorPeriod)
	if !m.armed.Load() {
		t.Fatal("stopped with a request in flight")
	}
	inFlight.Add(-1)
	for deadline := time.Now().Add(5 * time.Second); m.armed.Load(); time.Sleep(monitorPeriod) {
		if time.Now().After(deadline) {
			t.Fatal("still armed 5 s after the last request ended")
		}
	}
}

func TestMonitorArmsAgainForARequestThatStartedDuringItsLastTick(t *testing.T) {
	// The tick counts none in flight, then a request starts (and finds the timer armed), then
	// the tick disarms: the tick's second look arms it again.
	counts := []int64{0, 1}
	m := newMonitor(func() int64 {
		n := counts[0]
		if len(counts) > 1 {
			counts = counts[1:]
		}
		return n
	})
	defer m.timer.Stop()
	m.armed.Store(true)
	m.tick()
	if !m.armed.Load() {
		t.Fatal("a request that started during the tick is left without the timer")
	}
}

func TestGuardRunsTheMonitorForEachRequest(t *testing.T) {
	var g *guard
	var armed atomic.Bool
	step := newStep(t, func(w http.ResponseWriter, _ *http.Request) {
		armed.Store(g.monitor.armed.Load())
		_, _ = w.Write([]byte("ok"))
	})
	r, err := New(Config{Steps: []Step{{Name: "one", URL: step.URL}}}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	g = (&Server{Router: r}).guard()
	front := httptest.NewServer(g)
	defer front.Close()
	if a := post(t, front.URL, "text/plain", "hello", nil); a.status != http.StatusOK {
		t.Fatalf("answer %d %q", a.status, a.body)
	}
	if !armed.Load() {
		t.Fatal("the monitor was not running while the request called its step")
	}
}
