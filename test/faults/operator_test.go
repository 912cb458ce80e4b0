package faults

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/controller/pipeline"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
)

// operatorUser is the user an operator of a case writes as.
const operatorUser = "pipeline-operator"

// maxConcurrentReconciles is the manager's default (--max-concurrent-reconciles).
const maxConcurrentReconciles = 4

// inProcess is an operator run in the test's process, set up as cmd/ sets up the manager
// (without leader election): its connection can be wrapped, to count or to break its requests.
type inProcess struct {
	cancel context.CancelFunc
	done   chan error
	// err is what the manager returned when it stopped.
	err error
}

// startInProcess starts an operator on cfg, whose transport wrap wraps (nil: none).
func startInProcess(r *run, cfg *rest.Config, wrap func(http.RoundTripper) http.RoundTripper) *inProcess {
	r.Helper()
	cfg = rest.CopyConfig(cfg)
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  apply.CacheOptions(),
		// Several cases each run a manager in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		r.Fatalf("create manager: %v", err)
	}
	metrics, err := metrics.New(prometheus.NewRegistry(), mgr.GetCache())
	if err != nil {
		r.Fatalf("create metrics: %v", err)
	}
	rec := &pipeline.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("pipeline-operator"),
		Metrics:   metrics,
		// The router's objects are written like any other child; no router runs here.
		RouterImage: routerImage,
	}
	if err := rec.SetupWithManager(mgr, pipeline.WithMaxConcurrentReconciles(maxConcurrentReconciles)); err != nil {
		r.Fatalf("set up the reconciler: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &inProcess{cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	r.Cleanup(m.stop)
	return m
}

// stop stops the manager and waits for it; stopping twice is harmless.
func (m *inProcess) stop() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.cancel = nil
	m.err = <-m.done
}

// writeCounter counts the requests of a connection that change something: events apart, and
// leader election apart.
type writeCounter struct {
	writes, events atomic.Int64
}

// kindOfWrite tells a write to an event or a Lease from the operator's other writes; "" for reads.
func kindOfWrite(req *http.Request) string {
	switch {
	case req.Method == http.MethodGet || req.Method == http.MethodHead:
		return ""
	case strings.Contains(req.URL.Path, "/events"):
		return "event"
	case strings.Contains(req.URL.Path, "/leases"):
		return "lease"
	}
	return "write"
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		switch kindOfWrite(req) {
		case "write":
			w.writes.Add(1)
		case "event":
			w.events.Add(1)
		}
		return rt.RoundTrip(req)
	})
}

// quiet waits until the counted connection has made no write for the given time, and returns
// the writes counted by then; it gives up after a minute.
func (w *writeCounter) quiet(d time.Duration) int64 {
	last := int64(-1)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		now := w.writes.Load()
		if now == last {
			return now
		}
		last = now
		time.Sleep(d)
	}
	return w.writes.Load()
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
