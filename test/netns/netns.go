// Package netns reaches into a network namespace from a process outside it: the local
// cluster's real nodes, its control plane and its Services live in a namespace of their own,
// with no link or route to the machine's network, and a test or a command dials them through
// here (as root: entering a namespace needs CAP_SYS_ADMIN).
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Dialer dials TCP addresses (IP literals) inside the network namespace at path: the socket
// is made on a thread that has entered the namespace, and belongs to it for its life. Use it
// as an http.Transport's DialContext.
func Dialer(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := Do(path, func() error {
			var err error
			conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
}

// Do runs f on a thread inside the network namespace at path. f must not start goroutines
// that make sockets: they would run on other threads, outside the namespace.
func Do(path string, f func() error) error {
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open network namespace: %w", err)
	}
	defer func() { _ = target.Close() }()
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			result <- err
			return
		}
		defer func() { _ = own.Close() }()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			result <- fmt.Errorf("enter network namespace %s: %w", path, err)
			runtime.UnlockOSThread()
			return
		}
		err = f()
		// A thread that cannot go back stays locked: the runtime ends it with this goroutine.
		if back := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); back != nil {
			result <- errors.Join(err, fmt.Errorf("leave network namespace %s: %w", path, back))
			return
		}
		runtime.UnlockOSThread()
		result <- err
	}()
	return <-result
}
