// Command router is a Pipeline's data path: it carries each request through the pipeline's
// steps, each once what its inputs name has arrived (see docs/router.md), over HTTP and, with
// --grpc-listen, the Open Inference Protocol's gRPC service.
//
//	router --config FILE --listen ADDR --metrics-listen ADDR [--grpc-listen ADDR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/ndsl-cn/pipeline-operator/internal/router"
	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/version"
)

func main() {
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "router:", err)
			writeTerminationMessage(terminationLog, err.Error())
		}
		stop()
		os.Exit(1)
	}
}

// terminationLog is the file the kubelet reads, by default, as the message of a container that
// ended: why the router stopped shows in its pod's status, and the operator shows it in the
// Pipeline's.
const terminationLog = "/dev/termination-log"

// maxTerminationMessage is the most the kubelet keeps of a termination message.
const maxTerminationMessage = 4096

// writeTerminationMessage writes msg to path when that file exists (it does in a pod).
func writeTerminationMessage(path, msg string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return
	}
	if len(msg) > maxTerminationMessage {
		cut := maxTerminationMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	_, _ = f.WriteString(msg)
	_ = f.Close()
}

// signalContext ends on SIGTERM (what the kubelet sends) or an interrupt.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
}

// run loads the configuration, listens and serves until ctx ends.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("router", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configFile    = fs.String("config", "", "The router's configuration, a JSON file (docs/router.md). Required.")
		listen        = fs.String("listen", ":8080", "Address the pipeline is served on.")
		metricsListen = fs.String("metrics-listen", ":9090", "Address of /metrics, /healthz and /readyz.")
		grpcListen    = fs.String("grpc-listen", "",
			"Address the pipeline is also served on as the Open Inference Protocol's gRPC service (none when empty).")
		shutdownDelay   = fs.Duration("shutdown-delay", 0, "How long to keep serving after SIGTERM while /readyz fails.")
		shutdownTimeout = fs.Duration("shutdown-timeout", 0,
			"How long requests in flight may take to finish after SIGTERM (0: as long as a request may take).")
		maxInFlight = fs.Int("max-in-flight", router.DefaultMaxInFlight,
			"How many requests are served at once; more are answered 503 with Retry-After: 1.")
		minBodyRate = fs.Int64("min-body-rate", router.DefaultMinBodyRate,
			"Bytes of its body a caller must send per 10 s after the first second, else 408 (negative: no minimum).")
		retryMinPerSecond = fs.Float64("retry-budget-min-per-second", router.DefaultRetryMinPerSecond,
			"Retries per second each step's retry budget allows whatever its traffic, on top of 20% of its requests (0: the 20% alone).")
		writeTimeout = fs.Duration("write-timeout", routerconfig.DefaultWriteTimeout, "How long writing one answer may take.")
		logJSON      = fs.Bool("log-json", false, "Write the logs as JSON lines.")
		adaptProcs   = fs.Bool("adapt-procs", false, "Deprecated, does nothing: the router no longer changes GOMAXPROCS.")
		profiling    = fs.Bool("profiling", false,
			"Serve Go's profiles at /debug/pprof/ on the metrics listener (for benchmarks; never in front of callers).")
		showVersion = fs.Bool("version", false, "Print the release of the router and exit.")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println(version.String("pipeline-operator router"))
		return nil
	}
	if *configFile == "" {
		return errors.New("--config is required")
	}
	retryBudget := router.DefaultRetryBudget()
	retryBudget.MinPerSecond = *retryMinPerSecond
	if err := retryBudget.Validate(); err != nil {
		return fmt.Errorf("--retry-budget-min-per-second: %w", err)
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, nil)
	if *logJSON {
		handler = slog.NewJSONHandler(stderr, nil)
	}
	log := slog.New(handler)
	// What the standard library logs (net/http's notes on a step's connection, such as an
	// answer that came unasked) goes through the same handler.
	slog.SetDefault(log)
	if *adaptProcs {
		log.Warn("--adapt-procs is deprecated and does nothing: the router runs on GOMAXPROCS processors")
	}

	cfg, err := routerconfig.LoadConfig(*configFile)
	if err != nil {
		return err
	}
	rt, err := router.New(cfg, router.Options{Logger: log, RetryBudget: &retryBudget})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	adminLn, err := net.Listen("tcp", *metricsListen)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("metrics listen: %w", err)
	}
	srv := &router.Server{Router: rt, ShutdownDelay: *shutdownDelay, ShutdownTimeout: *shutdownTimeout,
		MaxInFlight: *maxInFlight, MinBodyRate: *minBodyRate, WriteTimeout: *writeTimeout, Profiling: *profiling}
	grpcAddr := ""
	if *grpcListen != "" {
		if srv.GRPC, err = net.Listen("tcp", *grpcListen); err != nil {
			_ = ln.Close()
			_ = adminLn.Close()
			return fmt.Errorf("grpc listen: %w", err)
		}
		grpcAddr = srv.GRPC.Addr().String()
	}
	log.Info("router serving", "version", version.Version, "pipeline", cfg.Pipeline, "steps", len(cfg.Steps),
		"listen", ln.Addr().String(), "metricsListen", adminLn.Addr().String(), "grpcListen", grpcAddr)
	start := time.Now()
	err = srv.Serve(ctx, ln, adminLn)
	log.Info("router stopped", "served", time.Since(start).Round(time.Millisecond).String(), "error", err)
	return err
}
