package router

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndsl-cn/pipeline-operator/internal/version"
)

// Reasons a step call fails, the reason label of pipeline_router_step_errors_total.
const (
	ReasonTimeout          = "timeout"
	ReasonConnection       = "connection"
	ReasonServerError      = "server_error"
	ReasonClientError      = "client_error"
	ReasonUnexpectedStatus = "unexpected_status"
	ReasonResponseTooLarge = "response_too_large"
	ReasonBufferBudget     = "buffer_budget"
	ReasonStopWhen         = "stop_when"
	ReasonCanceled         = "canceled"
)

// metrics are the router's Prometheus metrics.
type metrics struct {
	requests *prometheus.CounterVec
	// requestDuration is each request's time through the router, end to end.
	requestDuration *prometheus.HistogramVec
	stepDuration    *prometheus.HistogramVec
	stepRetries     *prometheus.CounterVec
	stepErrors      *prometheus.CounterVec
	// stepRetriesBudgetExhausted counts retries the step's retry budget refused.
	stepRetriesBudgetExhausted *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_router_requests_total",
			Help: "Requests the router answered, by HTTP status code.",
		}, []string{"code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "pipeline_router_request_duration_seconds",
			Help: "Time from a request's arrival to the router's answer, end to end (its body read, every step called, " +
				"retries and waits included), by HTTP status code.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"code"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pipeline_router_step_duration_seconds",
			Help:    "Duration of one call to a step (each attempt counts), until its response body is read.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"step"}),
		stepRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_router_step_retries_total",
			Help: "Calls to a step made again after a connection error, a timeout, a 502, 503 or 504, or a 429 with Retry-After.",
		}, []string{"step"}),
		stepRetriesBudgetExhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_router_step_retries_budget_exhausted_total",
			Help: "Retries of a step not made because its retry budget (20% of its requests in the last 10 s, plus 10 a second by default) was used up.",
		}, []string{"step"}),
		stepErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pipeline_router_step_errors_total",
			Help: "Failed calls to a step (each attempt counts), by reason.",
		}, []string{"step", "reason"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.requestDuration, m.stepDuration, m.stepRetries, m.stepErrors, m.stepRetriesBudgetExhausted,
		version.BuildInfo("pipeline_router")} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// stepMetrics are one step's series, resolved once so that a request does not look them up.
type stepMetrics struct {
	duration prometheus.Observer
	retries  prometheus.Counter
	errors   *prometheus.CounterVec
	// budgetExhausted counts retries the retry budget refused.
	budgetExhausted prometheus.Counter
}

func (m *metrics) forStep(name string) stepMetrics {
	// The series exist from the start, at zero, so that rates work before the first failure.
	m.stepErrors.WithLabelValues(name, ReasonTimeout)
	m.stepErrors.WithLabelValues(name, ReasonServerError)
	m.stepErrors.WithLabelValues(name, ReasonConnection)
	return stepMetrics{
		duration:        m.stepDuration.WithLabelValues(name),
		retries:         m.stepRetries.WithLabelValues(name),
		budgetExhausted: m.stepRetriesBudgetExhausted.WithLabelValues(name),
		errors:          m.stepErrors.MustCurryWith(prometheus.Labels{"step": name}),
	}
}

func (s stepMetrics) failed(reason string) { s.errors.WithLabelValues(reason).Inc() }

// answered counts a request answered with code, which arrived at start.
func (m *metrics) answered(code int, start time.Time) {
	c := strconv.Itoa(code)
	m.requests.WithLabelValues(c).Inc()
	m.requestDuration.WithLabelValues(c).Observe(time.Since(start).Seconds())
}
