package stepclient

import (
	"io"
	"net"
	"testing"
	"time"
)

// newDiscardingStep is a step on a raw loopback listener that reads and discards whatever its
// connections bring, and closes none: its URL.
func newDiscardingStep(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

func TestStepClientClosesConnectionsIdleTooLong(t *testing.T) {
	c := New(nil)
	tg, err := NewTarget(newDiscardingStep(t))
	if err != nil {
		t.Fatal(err)
	}
	var kept []*clientConn
	for range 3 {
		cc, err := c.get(t.Context(), tg.addr, time.Now().Add(time.Second), true)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, cc)
	}
	for _, cc := range kept {
		c.put(cc)
	}
	c.mu.Lock()
	kept[0].idleAt = time.Now().Add(-2 * idleConnTimeout)
	kept[1].idleAt = time.Now().Add(-2 * idleConnTimeout)
	c.mu.Unlock()
	c.closeIdle()
	c.mu.Lock()
	left := len(c.idle[tg.addr])
	c.mu.Unlock()
	if left != 1 {
		t.Errorf("%d idle connections left, want 1", left)
	}
	if _, err := kept[0].conn.Write([]byte("x")); err == nil {
		t.Error("a connection idle too long is still open")
	}
	if _, err := kept[2].conn.Write([]byte("x")); err != nil {
		t.Errorf("the connection used last was closed: %v", err)
	}
}
