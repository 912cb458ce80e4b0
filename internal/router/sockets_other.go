//go:build !linux

package router

import "net"

// newRawConn is conn: raw reads and writes are made on Linux only.
func newRawConn(conn net.Conn) net.Conn { return conn }

// wakeMonitorThread has nothing to do here: the sockets' ordinary system calls wake the
// runtime's monitor thread.
func wakeMonitorThread() {}

// rawListener is the listener it wraps here.
type rawListener struct{ net.Listener }

// connAlive cannot look into an idle connection here: a closed one fails its next call, which
// the router answers for as a connection error.
func connAlive(net.Conn) bool { return true }
