package webhookserver

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// requestMetrics are controller-runtime's webhook metrics, which its own server records: every
// answer of a webhook path by HTTP code (the server's refusals included), its latency, and the
// requests in flight. Registered with controller-runtime's registry, they are the ones it
// already holds.
type requestMetrics struct {
	latency  *prometheus.HistogramVec
	total    *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
}

// The names of requestMetrics' series.
const (
	MetricWebhookRequests = "controller_runtime_webhook_requests_total"
	MetricWebhookLatency  = "controller_runtime_webhook_latency_seconds"
	MetricWebhookInFlight = "controller_runtime_webhook_requests_in_flight"
)

func newRequestMetrics(reg prometheus.Registerer) (requestMetrics, error) {
	m := requestMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                            MetricWebhookLatency,
			Help:                            "Histogram of the latency of processing admission requests",
			Buckets:                         prometheus.ExponentialBuckets(10e-9, 10, 12),
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  100,
			NativeHistogramMinResetDuration: time.Hour,
		}, []string{"webhook"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricWebhookRequests,
			Help: "Total number of admission requests by HTTP status code.",
		}, []string{"webhook", "code"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricWebhookInFlight,
			Help: "Current number of admission requests being served.",
		}, []string{"webhook"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.latency, err = register(reg, m.latency)
	if err != nil {
		return m, err
	}
	m.total, err = register(reg, m.total)
	if err != nil {
		return m, err
	}
	m.inFlight, err = register(reg, m.inFlight)
	return m, err
}

// register registers c with reg, or returns the collector of the same description reg holds.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var already prometheus.AlreadyRegisteredError
	switch {
	case err == nil:
		return c, nil
	case errors.As(err, &already):
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register the webhook request metrics: %w", err)
}

// instrument records every answer of h, served at path.
func (m requestMetrics) instrument(path string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"webhook": path}
	total := m.total.MustCurryWith(labels)
	for _, code := range []string{"200", "400", "500"} {
		total.WithLabelValues(code)
	}
	return promhttp.InstrumentHandlerDuration(m.latency.MustCurryWith(labels),
		promhttp.InstrumentHandlerCounter(total, promhttp.InstrumentHandlerInFlight(m.inFlight.With(labels), h)))
}
