package router

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// rawPair is a loopback connection whose both ends are rawConns: the client's dialled, the
// server's accepted through rawListener.
func rawPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := rawListener{ln}.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client = newRawConn(c)
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	for _, c := range []net.Conn{client, server} {
		if _, ok := c.(*rawConn); !ok {
			t.Fatalf("%T is not a rawConn", c)
		}
	}
	return client, server
}

func TestRawConnCarriesMoreThanTheSocketsHoldBothWays(t *testing.T) {
	client, server := rawPair(t)
	// 16 MiB is far more than the sockets' buffers: both writers wait for the poller while the
	// other side reads in small pieces.
	data := make([]byte, 16<<20)
	_, _ = rand.Read(data)
	echoed := make(chan error, 1)
	go func() {
		_, err := io.Copy(server, io.LimitReader(server, int64(len(data))))
		echoed <- err
	}()
	written := make(chan error, 1)
	go func() {
		n, err := client.Write(data)
		if err == nil && n != len(data) {
			err = io.ErrShortWrite
		}
		written <- err
	}()
	got := make([]byte, 0, len(data))
	buf := make([]byte, 1000)
	for len(got) < len(data) {
		n, err := client.Read(buf)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:n]...)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if err := <-echoed; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the bytes read back differ from the bytes written")
	}
	if n, err := client.Read(nil); n != 0 || err != nil {
		t.Fatalf("an empty read gave %d, %v", n, err)
	}
}

func TestRawConnReadsTheEndOfTheStream(t *testing.T) {
	client, server := rawPair(t)
	if _, err := server.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	if err := server.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(client)
	if err != nil || string(got) != "last" {
		t.Fatalf("read %q, %v; want %q and the end of the stream", got, err, "last")
	}
	if n, err := client.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("a read after the end gave %d, %v; want io.EOF", n, err)
	}
}

func TestRawConnHonoursDeadlines(t *testing.T) {
	client, _ := rawPair(t)
	_ = client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	n, err := client.Read(make([]byte, 10))
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline gave %d, %v; want os.ErrDeadlineExceeded", n, err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%v is not a timeout", err)
	}
	// Nobody reads the server's side: the write fills the sockets' buffers, then waits.
	data := make([]byte, 64<<20)
	_ = client.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	n, err = client.Write(data)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n <= 0 || n >= len(data) {
		t.Fatalf("a write past its deadline gave %d of %d bytes, %v; want part of it and os.ErrDeadlineExceeded", n, len(data), err)
	}
}

// TestRawConnDoesNotBlockOnABlockingSocket: os.File.Fd puts a socket in blocking mode. A raw
// call that blocked would hold its processor past the deadline, until the peer acts.
func TestRawConnDoesNotBlockOnABlockingSocket(t *testing.T) {
	client, server := rawPair(t)
	f, err := client.(*rawConn).tcp.File()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	_ = f.Fd()
	// The peer closes after 3 s: a read or write that blocked would end then, with no timeout.
	go func() { time.Sleep(3 * time.Second); _ = server.Close() }()
	data := make([]byte, 64<<20)
	_ = client.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := client.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read on a blocking socket gave %v; want its deadline", err)
	}
	var op *net.OpError
	if n, err := client.Write(data); !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &op) || op.Op != "write" {
		t.Fatalf("a write on a blocking socket gave %d bytes, %v; want a write OpError at its deadline", n, err)
	}
}

func TestRawConnReportsAResetAsTheNetPackageDoes(t *testing.T) {
	client, server := rawPair(t)
	// A linger of 0 makes the server's close a reset.
	if err := server.(*rawConn).tcp.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	_ = server.Close()
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := client.Read(make([]byte, 10))
	var op *net.OpError
	if !errors.Is(err, syscall.ECONNRESET) || !errors.As(err, &op) || op.Op != "read" {
		t.Fatalf("a read after a reset gave %v; want a read OpError of ECONNRESET", err)
	}
	_, err = client.Write([]byte("after the reset"))
	if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a write after a reset gave %v; want EPIPE or ECONNRESET", err)
	}
}

func TestRawConnClosedWhileReadingEndsTheRead(t *testing.T) {
	client, _ := rawPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := client.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	_ = client.Close()
	select {
	case err := <-done:
		// net/http takes a "read" error for a connection that ended.
		var op *net.OpError
		if !errors.Is(err, net.ErrClosed) || !errors.As(err, &op) || op.Op != "read" {
			t.Fatalf("the read ended with %v; want a read OpError of net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read did not end when its connection closed")
	}
}

func TestStepClientUsesRawConns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	c := newStepClient()
	cc, err := c.get(context.Background(), ln.Addr().String(), time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.conn.Close() }()
	if _, ok := cc.conn.(*rawConn); !ok {
		t.Fatalf("the step client's connection is a %T, not a rawConn", cc.conn)
	}
	if !connAlive(cc.conn) {
		t.Fatal("connAlive found an open connection closed")
	}
}

// TestMonitorLetsOthersRunWhileARequestComputesAfterARawWait: on one processor, a request
// that starts after an idle moment, waits for a raw read (its step) and then computes for a
// second must not keep every other goroutine from running that long. The peer is another
// process, so that no timer or system call of this one wakes the runtime's monitor thread.
func TestMonitorLetsOthersRunWhileARequestComputesAfterARawWait(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash for its /dev/tcp")
	}
	waited := func(withMonitor bool) time.Duration {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ln.Close() }()
		// The request arrives after 0.3 s of idleness, the step's answer 0.3 s later.
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		peer := exec.Command(bash, "-c", "exec 3<>/dev/tcp/127.0.0.1/"+port+"; sleep 0.3; printf r >&3; sleep 0.3; printf a >&3; sleep 3")
		if err := peer.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = peer.Process.Kill(); _ = peer.Wait() }()
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		conn := newRawConn(c)
		defer func() { _ = conn.Close() }()

		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		var inFlight atomic.Int64
		m := newMonitor(inFlight.Load)
		defer func() { inFlight.Store(0); m.timer.Stop() }()
		if _, err := conn.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		// The request has started, as guard.ServeHTTP tells it.
		inFlight.Store(1)
		if withMonitor {
			m.started()
		}
		if _, err := conn.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		ran := make(chan time.Time, 1)
		go func() { ran <- time.Now() }()
		start := time.Now()
		for time.Since(start) < time.Second { // the request computing
		}
		return (<-ran).Sub(start)
	}
	t.Logf("without the monitor, another goroutine waited %s", waited(false))
	if d := waited(true); d > 500*time.Millisecond {
		t.Fatalf("with the monitor, another goroutine waited %s for one that computed for 1 s", d)
	} else {
		t.Logf("with the monitor, another goroutine waited %s", d)
	}
}
