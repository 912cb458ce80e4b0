package router

import (
	"context"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// procsWindow is how long the router must have served at most one request at a time before it
// runs on one processor.
const procsWindow = 500 * time.Millisecond

// procs runs the Go scheduler on one processor (GOMAXPROCS 1) while the router serves at most
// one request at a time, and on its default number of processors as soon as it serves two.
// One request's work is serial: more processors only add the waking and parking of idle
// threads each time the request waits for a step, which in make bench-router took about a
// quarter of the router's CPU time, and some of its latency, at one caller.
type procs struct {
	// one is true while the scheduler runs on one processor.
	one atomic.Bool
	// peak is the most requests in flight seen since the last tick (approximate: concurrent
	// updates may lose one, and the next request makes up for it).
	peak atomic.Int64
	// inFlight is the number of requests in flight now: the guard's count.
	inFlight func() int64
	// set applies a choice: runtime's, replaced in tests.
	set func(one bool)

	// mu orders the choices applied; applied is the last.
	mu      sync.Mutex
	applied bool
}

// newProcs is nil when the choice is not the router's: GOMAXPROCS is set in the environment,
// or the process has one processor anyway.
func newProcs(inFlight func() int64) *procs {
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) == 1 {
		return nil
	}
	return &procs{inFlight: inFlight, set: setProcs}
}

func setProcs(one bool) {
	if one {
		runtime.GOMAXPROCS(1)
		return
	}
	runtime.SetDefaultGOMAXPROCS()
}

// started is told the number of requests in flight when one starts.
func (p *procs) started(inFlight int64) {
	if inFlight > p.peak.Load() {
		p.peak.Store(inFlight)
	}
	if inFlight > 1 && p.one.Load() && p.one.CompareAndSwap(true, false) {
		p.apply()
	}
}

// tick goes to one processor when no two requests were in flight since the last tick, nor
// are now (requests that started before it count too).
func (p *procs) tick() {
	if max(p.peak.Swap(0), p.inFlight()) <= 1 && !p.one.Load() && p.one.CompareAndSwap(false, true) {
		p.apply()
		// A second request that started meanwhile found the default still in place, and left
		// it: back to it.
		if p.inFlight() > 1 && p.one.CompareAndSwap(true, false) {
			p.apply()
		}
	}
}

// apply makes the scheduler match one, the latest choice, whichever of two choices made at
// once applies last.
func (p *procs) apply() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if one := p.one.Load(); one != p.applied {
		p.set(one)
		p.applied = one
	}
}

// run ticks every procsWindow until ctx ends, then gives the scheduler its default back.
func (p *procs) run(ctx context.Context) {
	t := time.NewTicker(procsWindow)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.one.Store(false)
			p.apply()
			return
		case <-t.C:
			p.tick()
		}
	}
}
