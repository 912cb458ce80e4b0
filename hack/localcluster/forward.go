package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/ndsl-cn/pipeline-operator/test/netns"
)

// forward serves `localcluster forward`: it accepts connections on a loopback address of the
// machine and carries each to an address inside the cluster's network namespace, so that
// kubectl and tests outside it reach the apiserver. Nothing else of the namespace is reachable
// from outside.
func forward(args []string) error {
	fs := flag.NewFlagSet("forward", flag.ExitOnError)
	ns := fs.String("netns", "", "Path of the network namespace.")
	listen := fs.String("listen", "127.0.0.1:0", "Loopback address to accept connections on.")
	to := fs.String("to", "", "Address inside the namespace to carry them to.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("-listen %q is not a loopback address", *listen)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	dial := netns.Dialer(*ns)
	for {
		in, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer func() { _ = in.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := dial(ctx, "tcp", *to)
			cancel()
			if err != nil {
				fmt.Fprintf(os.Stderr, "forward: %v\n", err)
				return
			}
			defer func() { _ = out.Close() }()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); closeWrite(out); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); closeWrite(in); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}
