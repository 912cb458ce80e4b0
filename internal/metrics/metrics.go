// Package metrics holds the operator's Prometheus metrics: gauges read from the Pipelines'
// status at scrape time, and the rollout histogram, error and failover counters the
// reconciler records.
package metrics

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/version"
)

// Metric names, for dashboards, alerts and tests.
const (
	MetricPipelines         = "pipeline_operator_pipelines"
	MetricPipelinePhase     = "pipeline_operator_pipeline_phase"
	MetricStepReplicas      = "pipeline_operator_step_replicas"
	MetricStepReadyReplicas = "pipeline_operator_step_ready_replicas"
	MetricRolloutDuration   = "pipeline_operator_rollout_duration_seconds"
	MetricReconcileErrors   = "pipeline_operator_reconcile_errors_total"
	MetricStepFailovers     = "pipeline_operator_step_failovers_total"
	MetricRolloutDeadline   = "pipeline_operator_pipeline_rollout_deadline_timestamp_seconds"
	MetricStepLoadingSince  = "pipeline_operator_step_loading_since_timestamp_seconds"
	MetricStepModelLoad     = "pipeline_operator_step_model_load_seconds"
)

// phaseUnknown labels Pipelines the operator has not reported on yet (no status.phase).
const phaseUnknown = "Unknown"

// Metrics are the operator's own Prometheus metrics. The gauges are read from the Pipelines'
// status at scrape time, so they cost nothing between scrapes; the rollout histogram and the
// error counter are recorded by the reconciler.
type Metrics struct {
	rolloutDuration *prometheus.HistogramVec
	reconcileErrors *prometheus.CounterVec
	stepFailovers   *prometheus.CounterVec
	modelLoad       *prometheus.GaugeVec
}

// New registers the operator's metrics with reg; pipelines reads the Pipelines for the
// gauges (the manager's cache).
func New(reg prometheus.Registerer, pipelines client.Reader) (*Metrics, error) {
	m := &Metrics{
		rolloutDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricRolloutDuration,
			Help: "Time from the start of a rollout (the Progressing condition turning True) to the Pipeline running. " +
				"trigger is create for a new Pipeline's first generation, update otherwise.",
			Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800},
		}, []string{"trigger"}),
		reconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricReconcileErrors,
			Help: "Reconcile passes that ended in an error, by the reason of the Reconciled condition.",
		}, []string{"reason"}),
		stepFailovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricStepFailovers,
			Help: "Moves of a step off its node (not ready for spec.failover.afterSeconds, or gone) to another of its nodes; " +
				"step router counts the router's. 0 from the first pass over a step or router with fallbackLocations.",
		}, []string{"namespace", "pipeline", "step"}),
		modelLoad: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricStepModelLoad,
			Help: "How long each step's last model load took: from the start of the container that loaded it (status.steps[].loadingSince) " +
				"to the step Ready, as the leading replica saw it.",
		}, []string{"namespace", "pipeline", "step"}),
	}
	for _, c := range []prometheus.Collector{m.rolloutDuration, m.reconcileErrors, m.stepFailovers, m.modelLoad, newStatusCollector(pipelines),
		version.BuildInfo("pipeline_operator")} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveError counts a pass that ended in err. Passes refused only with conflicts run again at
// once and are not counted: something that keeps changing a Pipeline is no error of the operator.
func (m *Metrics) ObserveError(err error) {
	if m != nil && err != nil && !problem.OnlyConflicts(err) {
		m.reconcileErrors.WithLabelValues(problem.ReasonOf(err)).Inc()
	}
}

// ObserveFailover counts a failover of step of p (resources.RouterMetricName: of its router).
func (m *Metrics) ObserveFailover(p *pipelinev1.Pipeline, step string) {
	if m != nil {
		m.stepFailovers.WithLabelValues(p.Namespace, p.Name, step).Inc()
	}
}

// InitFailovers makes the failover counter of every step of p that has fallbackLocations, and
// of its router when it has them (step router), exist, at 0 until its first failover:
// increase() over a series that starts at its first failover would not count that one.
func (m *Metrics) InitFailovers(p *pipelinev1.Pipeline) {
	if m == nil {
		return
	}
	for i := range p.Spec.Steps {
		if len(p.Spec.Steps[i].FallbackLocations) > 0 {
			m.stepFailovers.WithLabelValues(p.Namespace, p.Name, resources.StepName(p, i)).Add(0)
		}
	}
	if rt := p.Spec.RouterSettings(); rt != nil && len(rt.FallbackLocations) > 0 {
		m.stepFailovers.WithLabelValues(p.Namespace, p.Name, resources.RouterMetricName).Add(0)
	}
}

// ForgetPipeline deletes the series of the Pipeline key names, which is gone.
func (m *Metrics) ForgetPipeline(key types.NamespacedName) {
	if m != nil {
		m.stepFailovers.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "pipeline": key.Name})
		m.modelLoad.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "pipeline": key.Name})
	}
}

// ObserveStatus records the model loads that ended (a step that was Loading is Ready) and a
// rollout that completed when the status moved from before to after.
func (m *Metrics) ObserveStatus(p *pipelinev1.Pipeline, before, after pipelinev1.PipelineStatus, now time.Time) {
	if m == nil {
		return
	}
	for _, s := range after.Steps {
		i := slices.IndexFunc(before.Steps, func(b pipelinev1.StepStatus) bool { return b.Name == s.Name })
		if s.State == pipelinev1.StepStateReady && i >= 0 && before.Steps[i].LoadingSince != nil {
			m.modelLoad.WithLabelValues(p.Namespace, p.Name, s.Name).Set(now.Sub(before.Steps[i].LoadingSince.Time).Seconds())
		}
	}
	if after.Phase != pipelinev1.PipelinePhaseRunning || before.Phase == pipelinev1.PipelinePhaseRunning {
		return
	}
	progressing := meta.FindStatusCondition(before.Conditions, pipelinev1.ConditionProgressing)
	if progressing == nil || progressing.Status != metav1.ConditionTrue {
		return
	}
	trigger := "update"
	if p.Generation == 1 {
		trigger = "create"
	}
	m.rolloutDuration.WithLabelValues(trigger).Observe(now.Sub(progressing.LastTransitionTime.Time).Seconds())
}

// statusCollector turns the status of every Pipeline into gauges at scrape time.
type statusCollector struct {
	pipelines    client.Reader
	count        *prometheus.Desc
	phase        *prometheus.Desc
	replicas     *prometheus.Desc
	readyReplica *prometheus.Desc
	deadline     *prometheus.Desc
	loading      *prometheus.Desc
}

func newStatusCollector(pipelines client.Reader) *statusCollector {
	return &statusCollector{
		pipelines: pipelines,
		count: prometheus.NewDesc(MetricPipelines,
			"Pipelines by phase: Creating, Running, Failed, Deleting, or Unknown (not reported on yet).", []string{"phase"}, nil),
		phase: prometheus.NewDesc(MetricPipelinePhase,
			"1 for the current phase of each Pipeline (Unknown: not reported on yet).", []string{"namespace", "pipeline", "phase"}, nil),
		replicas: prometheus.NewDesc(MetricStepReplicas,
			"Pods each step should have.", []string{"namespace", "pipeline", "step"}, nil),
		readyReplica: prometheus.NewDesc(MetricStepReadyReplicas,
			"Pods of each step that are ready.", []string{"namespace", "pipeline", "step"}, nil),
		deadline: prometheus.NewDesc(MetricRolloutDeadline,
			"For a Pipeline rolling out (Progressing True), when its steps' startup probes stop waiting for their "+
				"models to load: the start of the rollout plus the longest of them (modelLoadTimeoutSeconds). "+
				"PipelineStuckCreating allows for it.", []string{"namespace", "pipeline"}, nil),
		loading: prometheus.NewDesc(MetricStepLoadingSince,
			"For each step loading its model (state Loading), when the container that loads it started "+
				"(status.steps[].loadingSince): time() minus it is how long the load has taken so far.", []string{"namespace", "pipeline", "step"}, nil),
	}
}

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.phase
	ch <- c.replicas
	ch <- c.readyReplica
	ch <- c.deadline
	ch <- c.loading
}

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list := &pipelinev1.PipelineList{}
	// The Pipelines are only read: the cache's own objects need no copy.
	if err := c.pipelines.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(c.count, err)
		return
	}
	items := list.Items
	counts := map[string]int{phaseUnknown: 0}
	for _, ph := range []pipelinev1.PipelinePhase{pipelinev1.PipelinePhaseCreating, pipelinev1.PipelinePhaseRunning,
		pipelinev1.PipelinePhaseFailed, pipelinev1.PipelinePhaseDeleting} {
		counts[string(ph)] = 0
	}
	for i := range items {
		p := &items[i]
		phase := string(p.Status.Phase)
		if phase == "" {
			phase = phaseUnknown
		}
		counts[phase]++
		ch <- prometheus.MustNewConstMetric(c.phase, prometheus.GaugeValue, 1, p.Namespace, p.Name, phase)
		for _, s := range p.Status.Steps {
			ch <- prometheus.MustNewConstMetric(c.replicas, prometheus.GaugeValue, float64(ptr.Deref(s.Replicas, 0)), p.Namespace, p.Name, s.Name)
			ch <- prometheus.MustNewConstMetric(c.readyReplica, prometheus.GaugeValue, float64(ptr.Deref(s.ReadyReplicas, 0)), p.Namespace, p.Name, s.Name)
			if s.LoadingSince != nil {
				ch <- prometheus.MustNewConstMetric(c.loading, prometheus.GaugeValue, float64(s.LoadingSince.Unix()), p.Namespace, p.Name, s.Name)
			}
		}
		if deadline, ok := rolloutDeadline(p); ok {
			ch <- prometheus.MustNewConstMetric(c.deadline, prometheus.GaugeValue, float64(deadline.Unix()), p.Namespace, p.Name)
		}
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n), phase)
	}
}

// rolloutDeadline is when the startup probes of p's steps stop waiting for their models, for a
// Pipeline rolling out: the Progressing condition's turn to True and the longest patience.
func rolloutDeadline(p *pipelinev1.Pipeline) (time.Time, bool) {
	progressing := meta.FindStatusCondition(p.Status.Conditions, pipelinev1.ConditionProgressing)
	if progressing == nil || progressing.Status != metav1.ConditionTrue {
		return time.Time{}, false
	}
	var longest time.Duration
	for i := range p.Spec.Steps {
		longest = max(longest, resources.StartupPatience(p, i))
	}
	return progressing.LastTransitionTime.Add(longest), true
}
