//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package stepclient

import "net"

// connAliveWorks is false: here connAlive cannot look into a connection, and every call goes
// through net/http's Transport, whose reading goroutine watches an idle connection instead.
const connAliveWorks = false

// connAlive is never asked here.
func connAlive(net.Conn) bool { return false }
