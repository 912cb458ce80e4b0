package router

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// The router reads and writes its sockets with raw system calls, which skip the scheduler's
// bookkeeping around a call that may block. None of them blocks: each asks not to wait
// (MSG_DONTWAIT), and the wait for a socket to be ready is the net package's poller. The
// bookkeeping woke the runtime's monitor thread on the first call after every idle moment,
// which at one caller is each time the router waits for a step: a futex wake-up and a thread
// run on another CPU for nearly every request. Measured side by side on make bench-router's
// steps at one caller, the raw calls took 29-37 % off the router's CPU per request and added
// 1-18 % to its throughput, from run to run. The monitor thread still has work while requests are in
// flight: monitor.go wakes it.
//
// The race detector does not see the buffers of raw calls as it sees those of ordinary ones.

// rawConn is a TCP connection whose reads and writes are raw system calls. Deadlines, Close
// and the waiting are the net package's, through syscall.RawConn. It has the methods of a
// net.Conn, CloseWrite and SyscallConn; not the TCPConn's ReadFrom and WriteTo, which would
// copy with ordinary system calls.
type rawConn struct {
	net.Conn
	tcp *net.TCPConn
	raw syscall.RawConn

	// The state of the Read and of the Write in progress, which readFn and writeFn (made
	// once: no allocation per call) see. rmu and wmu keep one Read and one Write at a time.
	rmu    sync.Mutex
	rbuf   []byte
	rn     int
	rerrno syscall.Errno
	readFn func(fd uintptr) bool

	wmu     sync.Mutex
	wbuf    []byte
	wn      int
	werr    error
	writeFn func(fd uintptr) bool
}

// newRawConn is conn with raw reads and writes when it is a TCP connection, else conn.
func newRawConn(conn net.Conn) net.Conn {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return conn
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return conn
	}
	c := &rawConn{Conn: tc, tcp: tc, raw: raw}
	c.readFn, c.writeFn = c.readFd, c.writeFd
	return c
}

// readFd reads once into rbuf; false asks the poller to wait until fd is readable.
// MSG_DONTWAIT keeps the call from blocking even on a socket some code put in blocking mode
// (os.File.Fd does): a raw call that blocked would hold its processor, and stall any stop of
// the world until it returned.
func (c *rawConn) readFd(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&c.rbuf[0])), uintptr(len(c.rbuf)),
			syscall.MSG_DONTWAIT, 0, 0)
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			c.rn = int(n)
		default:
			c.rerrno = errno
		}
		return true
	}
}

func (c *rawConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return c.Conn.Read(p)
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rbuf, c.rn, c.rerrno = p, 0, 0
	err := c.raw.Read(c.readFn)
	c.rbuf = nil
	switch {
	case err != nil:
		return 0, asNetError(err, "read")
	case c.rerrno != 0:
		return 0, c.opError("read", c.rerrno)
	case c.rn == 0:
		return 0, io.EOF
	}
	return c.rn, nil
}

// writeFd writes what is left of wbuf; false asks the poller to wait until fd is writable.
// MSG_NOSIGNAL: a closed peer is an EPIPE error, not a signal.
func (c *rawConn) writeFd(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		n, _, errno := syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&c.wbuf[c.wn])), uintptr(len(c.wbuf)-c.wn),
			syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
		switch {
		case errno == 0 && n > 0 && int(n) <= len(c.wbuf)-c.wn:
			c.wn += int(n)
		case errno == 0:
			// Nothing written, or more than asked: the kernel never does either.
			c.werr = &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: io.ErrUnexpectedEOF}
			return true
		case errno == syscall.EINTR:
		case errno == syscall.EAGAIN:
			return false
		default:
			c.werr = c.opError("write", errno)
			return true
		}
	}
	return true
}

func (c *rawConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return c.Conn.Write(p)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf, c.wn, c.werr = p, 0, nil
	err := c.raw.Write(c.writeFn)
	c.wbuf = nil
	if err != nil {
		return c.wn, asNetError(err, "write")
	}
	return c.wn, c.werr
}

// CloseWrite shuts down the writing side, as net/http's server does before it closes.
func (c *rawConn) CloseWrite() error { return c.tcp.CloseWrite() }

// SyscallConn is the connection's file descriptor, as connAlive uses it.
func (c *rawConn) SyscallConn() (syscall.RawConn, error) { return c.raw, nil }

// asNetError is an error of the poller's wait (a deadline, a closed connection) as a Read or a
// Write of the net package reports it: syscall.RawConn names the operation "raw-read" or
// "raw-write", and net/http, for one, takes only a "read" error for a connection that ended.
func asNetError(err error, op string) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
	}
	return err
}

// opError is errno as the net package reports it.
func (c *rawConn) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}

// wakeMonitorThread makes one ordinary system call, whose entry wakes the runtime's monitor
// thread if it sleeps (monitor.go).
func wakeMonitorThread() {
	_, _, _ = syscall.Syscall(syscall.SYS_GETPID, 0, 0, 0)
}

// rawListener accepts rawConns.
type rawListener struct{ net.Listener }

func (l rawListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newRawConn(conn), nil
}

// connAlive reports whether an idle connection is still open: a peek that does not wait finds
// nothing to read. A step that closed it (its idle timeout, a restart) left an end of file or
// an error; one that sent something unasked spoiled it. Either way it is not used again.
func connAlive(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		alive = errno == syscall.EAGAIN
		return true
	})
	return err == nil && alive
}
