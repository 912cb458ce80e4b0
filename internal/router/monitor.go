package router

import (
	"sync/atomic"
	"time"
)

// monitorPeriod is the longest the Go runtime's monitor thread sleeps while requests are in
// flight.
const monitorPeriod = 10 * time.Millisecond

// monitor wakes the Go runtime's monitor thread when requests start after an idle moment, and
// keeps a timer at most monitorPeriod ahead while they are in flight.
//
// The monitor thread (sysmon) preempts a goroutine that has run 10 ms without yielding, and
// polls the network when it has not been polled for 10 ms. When it finds every processor idle
// it sleeps, for a time fixed as it falls asleep: until the next timer, at most 60 s. Only an
// ordinary system call or the world restarting after a stop (a collection, a GOMAXPROCS
// change) wakes it earlier. The router's socket calls are raw (sockets_linux.go): without the
// monitor, a request that started after an idle moment and then computed for long (stopWhen
// over a large answer) would hold its processor until it blocked, and on one processor
// (--adapt-procs) nothing else would run meanwhile, not another caller's request nor a probe.
// So the first request after an idle moment makes one ordinary system call, which wakes the
// thread, and the timer keeps it from sleeping longer than monitorPeriod while requests are in
// flight.
type monitor struct {
	// inFlight is the number of requests in flight now: the guard's count.
	inFlight func() int64
	// armed is true while the timer runs, from the first request that started to the tick
	// that finds none in flight.
	armed atomic.Bool
	timer *time.Timer
}

func newMonitor(inFlight func() int64) *monitor {
	m := &monitor{inFlight: inFlight}
	m.timer = time.AfterFunc(monitorPeriod, m.tick)
	m.timer.Stop()
	return m
}

// started arms the timer and wakes the monitor thread, when the timer is not armed, for a
// request that has started.
func (m *monitor) started() {
	if !m.armed.Load() && m.armed.CompareAndSwap(false, true) {
		m.timer.Reset(monitorPeriod)
		wakeMonitorThread()
	}
}

// tick runs the timer again while requests are in flight, and stops it once none is.
func (m *monitor) tick() {
	if m.inFlight() > 0 {
		m.timer.Reset(monitorPeriod)
		return
	}
	m.armed.Store(false)
	// A request that started after the count found the timer still armed, and left it: arm it
	// again for that one.
	if m.inFlight() > 0 {
		m.started()
	}
}
