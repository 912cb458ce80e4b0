package stepclient

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// idleClock is the idle pool's clock in a test: time moves when the test says, and the sweep
// that is due runs when time reaches it.
type idleClock struct {
	now time.Time
	// sweep is the scheduled sweep (nil when none), due at.
	sweep func()
	at    time.Time
	// sweeps are the times the sweeps ran.
	sweeps []time.Time
}

// advance moves the clock d ahead, running each sweep that falls due on the way.
func (k *idleClock) advance(d time.Duration) {
	end := k.now.Add(d)
	for k.sweep != nil && !k.at.After(end) {
		f := k.sweep
		k.sweep, k.now = nil, k.at
		k.sweeps = append(k.sweeps, k.now)
		f()
	}
	k.now = end
}

// newIdleTestClient is a step client on clock that dials nothing: its pool takes idleConns.
func newIdleTestClient(t *testing.T, clock *idleClock) *Client {
	t.Helper()
	c := New(func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no dialling in this test")
	})
	c.now = func() time.Time { return clock.now }
	c.afterFunc = func(d time.Duration, f func()) {
		if clock.sweep != nil {
			t.Error("a sweep was scheduled while another was due")
		}
		clock.sweep, clock.at = f, clock.now.Add(d)
	}
	return c
}

// idleConn is a connection of the idle pool's tests: it notes when it was closed.
type idleConn struct {
	net.Conn
	clock    *idleClock
	closedAt time.Time
}

func (c *idleConn) Close() error {
	if c.closedAt.IsZero() {
		c.closedAt = c.clock.now
	}
	return nil
}

func (c *idleConn) closed() bool { return !c.closedAt.IsZero() }

// putNew puts back a new connection to addr and returns it.
func putNew(c *Client, clock *idleClock, addr string) (*clientConn, *idleConn) {
	conn := &idleConn{clock: clock}
	cc := &clientConn{addr: addr, conn: conn}
	c.put(cc)
	return cc, conn
}

// countIdle is how many connections the pool keeps, failing the test when its count differs.
func countIdle(t *testing.T, c *Client) int {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, conns := range c.idle {
		n += len(conns)
	}
	if n != c.idleConns {
		t.Errorf("the pool counts %d idle connections, its lists hold %d", c.idleConns, n)
	}
	return n
}

// TestStepClientClosesIdleConnectionsSoonAfterTheirTimeout puts back a connection every second,
// to two steps in turn, for longer than idleConnTimeout: each is closed once idle for
// idleConnTimeout, at most idleSweepSlack later, by sweeps at least idleSweepSlack apart.
func TestStepClientClosesIdleConnectionsSoonAfterTheirTimeout(t *testing.T) {
	clock := &idleClock{now: time.Unix(1_000_000, 0)}
	c := newIdleTestClient(t, clock)
	type kept struct {
		cc   *clientConn
		conn *idleConn
	}
	var all []kept
	for i := range int(idleConnTimeout/time.Second) + 30 {
		cc, conn := putNew(c, clock, []string{"a:80", "b:80"}[i%2])
		all = append(all, kept{cc, conn})
		clock.advance(time.Second)
	}
	clock.advance(2 * idleConnTimeout)
	for i, k := range all {
		idle := k.conn.closedAt.Sub(k.cc.idleAt)
		if !k.conn.closed() || idle < idleConnTimeout || idle > idleConnTimeout+idleSweepSlack {
			t.Fatalf("connection %d closed after %v idle, want between %v and %v", i, idle, idleConnTimeout, idleConnTimeout+idleSweepSlack)
		}
	}
	for i := 1; i < len(clock.sweeps); i++ {
		if gap := clock.sweeps[i].Sub(clock.sweeps[i-1]); gap < idleSweepSlack {
			t.Errorf("sweeps %v apart, want at least %v", gap, idleSweepSlack)
		}
	}
	if n := countIdle(t, c); n != 0 || clock.sweep != nil {
		t.Errorf("%d idle connections left, a sweep due: %v; want none", n, clock.sweep != nil)
	}
}

// TestStepClientKeepsTheNewestIdleConnectionsOfAStep puts back more than maxIdlePerStep
// connections to one step: those idle longest are closed, and the step's newest kept.
func TestStepClientKeepsTheNewestIdleConnectionsOfAStep(t *testing.T) {
	const over = 3
	clock := &idleClock{now: time.Unix(1_000_000, 0)}
	c := newIdleTestClient(t, clock)
	var conns []*idleConn
	for range maxIdlePerStep + over {
		_, conn := putNew(c, clock, "a:80")
		conns = append(conns, conn)
		clock.advance(time.Millisecond)
	}
	for i, conn := range conns {
		if want := i < over; conn.closed() != want {
			t.Fatalf("connection %d of %d closed: %v, want %v", i, len(conns), conn.closed(), want)
		}
	}
	if n := countIdle(t, c); n != maxIdlePerStep {
		t.Errorf("%d idle connections, want %d", n, maxIdlePerStep)
	}
	if last := c.idle["a:80"][maxIdlePerStep-1].conn; last != conns[len(conns)-1] {
		t.Error("the connection put back last is not the next one taken")
	}
}

// TestStepClientCapsIdleConnectionsOverAllSteps puts back more than maxIdleConns connections,
// to steps that each keep fewer than maxIdlePerStep: those idle longest, whichever their step,
// are closed.
func TestStepClientCapsIdleConnectionsOverAllSteps(t *testing.T) {
	const over = 100
	clock := &idleClock{now: time.Unix(1_000_000, 0)}
	c := newIdleTestClient(t, clock)
	addrs := []string{"a:80", "b:80", "c:80", "d:80", "e:80", "f:80", "g:80", "h:80"}
	if (maxIdleConns+over)/len(addrs) >= maxIdlePerStep {
		t.Fatal("the test's steps would each reach maxIdlePerStep")
	}
	var conns []*idleConn
	for i := range maxIdleConns + over {
		_, conn := putNew(c, clock, addrs[i%len(addrs)])
		conns = append(conns, conn)
		clock.advance(time.Millisecond)
	}
	for i, conn := range conns {
		if want := i < over; conn.closed() != want {
			t.Fatalf("connection %d of %d closed: %v, want %v", i, len(conns), conn.closed(), want)
		}
	}
	if n := countIdle(t, c); n != maxIdleConns {
		t.Fatalf("%d idle connections, want %d", n, maxIdleConns)
	}
	// A step's connections, all found closed by the step as the next call takes them, leave
	// room for as many others.
	ofA := len(c.idle["a:80"])
	if _, err := c.get(t.Context(), "a:80", clock.now.Add(time.Second), false); err == nil {
		t.Fatal("got a connection from a pool of closed ones")
	}
	left := countIdle(t, c)
	if left != maxIdleConns-ofA {
		t.Fatalf("%d idle connections after step a's %d were dropped, want %d", left, ofA, maxIdleConns-ofA)
	}
	for i := range maxIdleConns - left {
		putNew(c, clock, addrs[1+i%(len(addrs)-1)])
	}
	for i, conn := range conns {
		if i >= over && i%len(addrs) != 0 && conn.closed() {
			t.Fatalf("connection %d closed while the pool had room", i)
		}
	}
	// Full again: the next one closes the oldest still kept, step a's list being empty.
	putNew(c, clock, "h:80")
	if !conns[over].closed() || conns[over+1].closed() {
		t.Errorf("connections %d and %d closed: %v, %v; want the first only", over, over+1, conns[over].closed(), conns[over+1].closed())
	}
	if n := countIdle(t, c); n != maxIdleConns {
		t.Errorf("%d idle connections, want %d", n, maxIdleConns)
	}
}
