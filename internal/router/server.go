package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// Server serves a Router on one listener and /metrics, /healthz and /readyz on another, and
// shuts down gracefully.
type Server struct {
	// Router is the pipeline's handler.
	Router *Router
	// ShutdownDelay is how long the server keeps accepting requests after it is told to stop
	// while /readyz already fails, so that load balancers stop sending first.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the wait for requests in flight; requests still running then are
	// cut. When 0, it is as long as a request may take (see LongestRequest): every request in
	// flight runs to its own deadline.
	ShutdownTimeout time.Duration
	// MaxInFlight is how many requests are served at once (DefaultMaxInFlight when 0); a
	// request over it is answered 503 with Retry-After: 1.
	MaxInFlight int
	// MinBodyRate is how many bytes of its body a caller must send per 10 s after the first
	// second (DefaultMinBodyRate when 0, no minimum when negative); a caller that falls behind
	// is answered 408 and what its body held is released.
	MinBodyRate int64
	// WriteTimeout bounds the writing of one answer, from its first byte
	// (config.DefaultWriteTimeout when 0).
	WriteTimeout time.Duration
	// GRPC, when set, is the listener the pipeline is also served on as the Open Inference
	// Protocol's gRPC service (inference.GRPCInferenceService), under the same limits: one count
	// of requests in flight for both, messages of at most maxBodyBytes.
	GRPC net.Listener
	// Profiling serves Go's profiles (net/http/pprof) at /debug/pprof/ on the admin listener.
	// Off by default: a profile shows the program's internals to whoever reaches that port.
	Profiling bool

	// bodyRateWindow replaces bodyRateWindow (and a tenth of it bodyRateGrace) when set: tests
	// shorten it.
	bodyRateWindow time.Duration

	ready atomic.Bool
}

// Serve serves until ctx ends, then stops accepting, waits for the requests in flight (at most
// ShutdownTimeout) and returns. It closes both listeners.
func (s *Server) Serve(ctx context.Context, ln, adminLn net.Listener) error {
	// The read timeout bounds how long a caller may take to send its request; the guard keeps
	// its body to a minimum rate, and bounds the writing of each answer.
	g := s.guard()
	main := &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: config.BodyReadTimeout, IdleTimeout: 120 * time.Second}
	admin := &http.Server{Handler: s.adminHandler(s.Router.Gatherer()), ReadHeaderTimeout: 10 * time.Second}

	errc := make(chan error, 4)
	go func() { errc <- serve(main, ln, "pipeline") }()
	var grpcServer *grpc.Server
	if s.GRPC != nil {
		grpcServer = s.newGRPCServer(g)
		go func() { errc <- serveGRPC(grpcServer, s.GRPC) }()
	}
	go func() { errc <- serve(admin, adminLn, "metrics") }()
	// Ready at once, or once the models' metadata admits every tensor mapping; a mapping the
	// metadata refuses stops the server with its *MappingError.
	var (
		readyMu sync.Mutex
		stopped bool
	)
	markReady := func() {
		readyMu.Lock()
		defer readyMu.Unlock()
		if !stopped {
			s.ready.Store(true)
		}
	}
	if s.Router.NeedsModels() {
		go func() {
			if err := s.Router.CheckModels(ctx); err != nil {
				if ctx.Err() == nil {
					errc <- err
				}
				return
			}
			markReady()
		}()
	} else {
		markReady()
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	readyMu.Lock()
	stopped = true
	s.ready.Store(false)
	readyMu.Unlock()
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
		timeout = s.LongestRequest()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if grpcServer != nil {
		// Both servers drain at once, gRPC's cut at the same deadline.
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			grpcServer.GracefulStop()
		}()
		defer func() {
			select {
			case <-drained:
			case <-sctx.Done():
				grpcServer.Stop()
				<-drained
			}
		}()
	}
	if serr := main.Shutdown(sctx); serr != nil {
		_ = main.Close()
		err = errors.Join(err, fmt.Errorf("requests in flight after %s were cut: %w", timeout, serr))
	}
	_ = admin.Close()
	return err
}

// LongestRequest is the longest a request may take: config.BodyReadTimeout to send its body, the
// router's request deadline (requestTimeoutSeconds) and the write timeout of its answer.
func (s *Server) LongestRequest() time.Duration {
	return config.BodyReadTimeout + s.Router.requestTimeout + cmp.Or(max(s.WriteTimeout, 0), config.DefaultWriteTimeout)
}

// guard is the handler that puts the server's limits in front of the router.
func (s *Server) guard() *guard {
	g := &guard{router: s.Router, maxInFlight: int64(s.MaxInFlight), minBodyRate: s.MinBodyRate,
		window: bodyRateWindow, grace: bodyRateGrace, writeTimeout: s.WriteTimeout}
	if g.maxInFlight <= 0 {
		g.maxInFlight = DefaultMaxInFlight
	}
	switch {
	case g.minBodyRate == 0:
		g.minBodyRate = DefaultMinBodyRate
	case g.minBodyRate < 0:
		g.minBodyRate = 0
	}
	if g.writeTimeout <= 0 {
		g.writeTimeout = config.DefaultWriteTimeout
	}
	if s.bodyRateWindow > 0 {
		g.window, g.grace = s.bodyRateWindow, s.bodyRateWindow/10
	}
	return g
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
	if s.Profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}
