//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package stepclient

import (
	"errors"
	"net"
	"syscall"
)

// connAliveWorks is true: here connAlive can look into a connection.
const connAliveWorks = true

// connAlive reports whether an idle connection is still open and clean: a peek that does not
// wait (recv with MSG_PEEK and MSG_DONTWAIT, through the net package's syscall.RawConn) finds
// nothing to read. A step that closed the connection (its idle timeout, a restart) left an end
// of file or an error; one that sent something unasked spoiled it. Either way it is not used
// again.
func connAlive(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
		return true
	})
	return err == nil && alive
}
