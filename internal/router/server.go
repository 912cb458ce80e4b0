package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultShutdownTimeout bounds how long requests in flight may take to finish once the
// router is told to stop.
const DefaultShutdownTimeout = 25 * time.Second

// Server serves a Router on one listener and /metrics, /healthz and /readyz on another, and
// shuts down gracefully.
type Server struct {
	// Router is the pipeline's handler.
	Router *Router
	// ShutdownDelay is how long the server keeps accepting requests after it is told to stop
	// while /readyz already fails, so that load balancers stop sending first.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the wait for requests in flight (DefaultShutdownTimeout when 0);
	// requests still running then are cut.
	ShutdownTimeout time.Duration

	ready atomic.Bool
}

// bodyReadTimeout is how long a caller may take to send a request, its body included.
const bodyReadTimeout = 2 * time.Minute

// Serve serves until ctx ends, then stops accepting, waits for the requests in flight (at most
// ShutdownTimeout) and returns. It closes both listeners.
func (s *Server) Serve(ctx context.Context, ln, adminLn net.Listener) error {
	// The read timeout bounds how long a caller may take to send its body, which holds its share
	// of the body budget from the first byte.
	main := &http.Server{Handler: s.Router, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: bodyReadTimeout, IdleTimeout: 120 * time.Second}
	admin := &http.Server{Handler: s.adminHandler(s.Router.Gatherer()), ReadHeaderTimeout: 10 * time.Second}

	errc := make(chan error, 2)
	go func() { errc <- serve(main, ln, "pipeline") }()
	go func() { errc <- serve(admin, adminLn, "metrics") }()
	s.ready.Store(true)

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.ready.Store(false)
	if err == nil && s.ShutdownDelay > 0 {
		t := time.NewTimer(s.ShutdownDelay)
		select {
		case <-t.C:
		case err = <-errc:
			t.Stop()
		}
	}
	timeout := s.ShutdownTimeout
	if timeout == 0 {
		timeout = DefaultShutdownTimeout
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if serr := main.Shutdown(sctx); serr != nil {
		_ = main.Close()
		err = errors.Join(err, fmt.Errorf("requests in flight after %s were cut: %w", timeout, serr))
	}
	_ = admin.Close()
	return err
}

func serve(srv *http.Server, ln net.Listener, what string) error {
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s on %s: %w", what, ln.Addr(), err)
	}
	return nil
}

func (s *Server) adminHandler(gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
