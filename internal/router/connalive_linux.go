package router

import (
	"errors"
	"net"
	"syscall"
)

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
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = errors.Is(rerr, syscall.EAGAIN)
		return true
	})
	return err == nil && alive
}
