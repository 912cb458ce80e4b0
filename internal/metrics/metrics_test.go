package metrics

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
	"github.com/ndsl-cn/pipeline-operator/internal/status/statustest"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver"
)

func TestStatusGauges(t *testing.T) {
	running := testenv.Sample(t, "vision")
	running.Status = status.Compute(running, convergedWorld())
	fresh := testenv.Sample(t, "edge")
	fresh.Name = "fresh"
	reader := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(running, fresh).Build()

	reg := prometheus.NewPedanticRegistry()
	if _, err := New(reg, reader); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP pipeline_operator_pipelines Pipelines by phase: Creating, Running, Failed, Deleting, or Unknown (not reported on yet).
# TYPE pipeline_operator_pipelines gauge
pipeline_operator_pipelines{phase="Creating"} 0
pipeline_operator_pipelines{phase="Deleting"} 0
pipeline_operator_pipelines{phase="Failed"} 0
pipeline_operator_pipelines{phase="Running"} 1
pipeline_operator_pipelines{phase="Unknown"} 1
# HELP pipeline_operator_pipeline_phase 1 for the current phase of each Pipeline (Unknown: not reported on yet).
# TYPE pipeline_operator_pipeline_phase gauge
pipeline_operator_pipeline_phase{namespace="edge",phase="Unknown",pipeline="fresh"} 1
pipeline_operator_pipeline_phase{namespace="vision",phase="Running",pipeline="facedetection-pipeline"} 1
# HELP pipeline_operator_step_ready_replicas Pods of each step that are ready.
# TYPE pipeline_operator_step_ready_replicas gauge
pipeline_operator_step_ready_replicas{namespace="vision",pipeline="facedetection-pipeline",step="step-1"} 1
pipeline_operator_step_ready_replicas{namespace="vision",pipeline="facedetection-pipeline",step="step-2"} 1
# HELP pipeline_operator_step_replicas Pods each step should have.
# TYPE pipeline_operator_step_replicas gauge
pipeline_operator_step_replicas{namespace="vision",pipeline="facedetection-pipeline",step="step-1"} 1
pipeline_operator_step_replicas{namespace="vision",pipeline="facedetection-pipeline",step="step-2"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricPipelines, MetricPipelinePhase,
		MetricStepReplicas, MetricStepReadyReplicas); err != nil {
		t.Error(err)
	}
}

func TestRolloutAndErrorMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, fake.NewClientBuilder().Build())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	creating := pipelinev1.PipelineStatus{Phase: pipelinev1.PipelinePhaseCreating, Conditions: []metav1.Condition{{
		Type: pipelinev1.ConditionProgressing, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(start)}}}
	running := pipelinev1.PipelineStatus{Phase: pipelinev1.PipelinePhaseRunning}

	p := testenv.Sample(t, "default")
	p.Generation = 1
	m.ObserveStatus(p, creating, running, start.Add(7*time.Second))
	m.ObserveStatus(p, running, running, start.Add(9*time.Second)) // no rollout completed
	p.Generation = 2
	m.ObserveStatus(p, creating, running, start.Add(40*time.Second))

	if got := testutil.CollectAndCount(m.rolloutDuration); got != 2 {
		t.Errorf("%d rollout series, want create and update", got)
	}
	h := m.rolloutDuration.WithLabelValues("create").(prometheus.Histogram)
	if err := testutil.CollectAndCompare(h, strings.NewReader(`
# HELP pipeline_operator_rollout_duration_seconds Time from the start of a rollout (the Progressing condition turning True) to the Pipeline running. trigger is create for a new Pipeline's first generation, update otherwise.
# TYPE pipeline_operator_rollout_duration_seconds histogram
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="1"} 0
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="2"} 0
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="5"} 0
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="10"} 1
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="20"} 1
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="30"} 1
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="60"} 1
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="120"} 1
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="300"} 1
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="600"} 1
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="1200"} 1
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="1800"} 1
pipeline_operator_rollout_duration_seconds_bucket{trigger="create",le="+Inf"} 1
pipeline_operator_rollout_duration_seconds_sum{trigger="create"} 7
pipeline_operator_rollout_duration_seconds_count{trigger="create"} 1
`)); err != nil {
		t.Error(err)
	}

	m.ObserveError(nil)
	m.ObserveError(problem.WithReason(pipelinev1.ReasonApplyFailed, errors.New("boom")))
	m.ObserveError(errors.Join(errors.New("x"), problem.WithReason(pipelinev1.ReasonDeleteFailed, errors.New("y"))))
	if v := testutil.ToFloat64(m.reconcileErrors.WithLabelValues(pipelinev1.ReasonApplyFailed)); v != 1 {
		t.Errorf("ApplyFailed errors = %v", v)
	}
	if v := testutil.ToFloat64(m.reconcileErrors.WithLabelValues(pipelinev1.ReasonDeleteFailed)); v != 1 {
		t.Errorf("DeleteFailed errors = %v", v)
	}

	var nilMetrics *Metrics
	nilMetrics.ObserveError(errors.New("ignored"))
	nilMetrics.ObserveStatus(p, creating, running, start)
}

// The failover counter of each step and router with fallbackLocations exists, at 0, from the
// first pass; the router's only with dataPath.mode Router.
func TestInitFailovers(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, fake.NewClientBuilder().WithScheme(testenv.Scheme()).Build())
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.RoutedSample(t)
	p.Spec.DataPath.Router.FallbackLocations = []string{"edge-b"}
	p.Spec.Steps[1].FallbackLocations = []string{"edge-c"}
	chained := p.DeepCopy()
	chained.Name = "chained"
	chained.Spec.DataPath.Mode = pipelinev1.DataPathModeChain
	m.InitFailovers(p)
	m.InitFailovers(chained)
	want := `
# HELP pipeline_operator_step_failovers_total Moves of a step off its node (not ready for spec.failover.afterSeconds, or gone) to another of its nodes; step router counts the router's. 0 from the first pass over a step or router with fallbackLocations.
# TYPE pipeline_operator_step_failovers_total counter
pipeline_operator_step_failovers_total{namespace="vision",pipeline="chained",step="step-2"} 0
pipeline_operator_step_failovers_total{namespace="vision",pipeline="facedetection-pipeline",step="router"} 0
pipeline_operator_step_failovers_total{namespace="vision",pipeline="facedetection-pipeline",step="step-2"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricStepFailovers); err != nil {
		t.Error(err)
	}
	m.ForgetPipeline(client.ObjectKeyFromObject(p))
	if got := testutil.CollectAndCount(m.stepFailovers); got != 1 {
		t.Errorf("%d failover series after the Pipeline went, want the other Pipeline's 1", got)
	}
}

// TestAlertsAndDashboardUseExportedMetrics keeps config/prometheus and config/grafana in step
// with the metrics the operator exports: these, its build information and its webhook server's.
func TestAlertsAndDashboardUseExportedMetrics(t *testing.T) {
	exported := map[string]bool{}
	for _, n := range []string{MetricPipelines, MetricPipelinePhase, MetricStepReplicas, MetricStepReadyReplicas,
		MetricRolloutDuration, MetricReconcileErrors, MetricStepFailovers, MetricRolloutDeadline,
		MetricStepLoadingSince, MetricStepModelLoad, "pipeline_operator_build_info", webhookserver.MetricWebhookCertificateExpiry} {
		exported[n] = true
	}
	name := regexp.MustCompile(`pipeline_operator_[a-z_]+`)
	for _, f := range []string{"../../config/prometheus/rules.yaml", "../../config/grafana/pipeline-operator.json"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		used := name.FindAllString(string(data), -1)
		if len(used) == 0 {
			t.Errorf("%s uses none of the operator's metrics", f)
		}
		for _, n := range used {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
			if !exported[n] && !exported[base] {
				t.Errorf("%s uses %s, which the operator does not export", f, n)
			}
		}
	}
}

// convergedWorld is what a pass observes of a healthy two-step nfs Pipeline.
func convergedWorld() *status.Observed {
	return &status.Observed{
		PV:          statustest.BoundPV(),
		PVC:         statustest.BoundPVC(),
		Deployments: []*appsv1.Deployment{statustest.AvailableDeployment(1), statustest.AvailableDeployment(1)},
		Services:    []*corev1.Service{statustest.ReadyService(), statustest.ReadyService()},
	}
}

// A Pipeline rolling out reports when its steps' startup probes stop waiting for their models:
// the rollout's start plus the longest patience (modelLoadTimeoutSeconds of a model server, a
// step's own startup probe); a Pipeline not rolling out reports none.
func TestRolloutDeadline(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	rolling := testenv.Sample(t, "vision")
	rolling.Spec.Steps[0].Protocol = pipelinev1.StepProtocolOpenInference
	rolling.Spec.Steps[0].ModelLoadTimeoutSeconds = new(int32(1800))
	rolling.Spec.Steps[1].StartupProbe = &corev1.Probe{InitialDelaySeconds: 5, PeriodSeconds: 20, FailureThreshold: 30}
	rolling.Status.Conditions = []metav1.Condition{{Type: pipelinev1.ConditionProgressing, Status: metav1.ConditionTrue,
		Reason: "RollingOut", LastTransitionTime: start}}
	done := testenv.Sample(t, "edge")
	done.Status.Conditions = []metav1.Condition{{Type: pipelinev1.ConditionProgressing, Status: metav1.ConditionFalse,
		Reason: "RolledOut", LastTransitionTime: start}}
	reader := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(rolling, done).Build()
	reg := prometheus.NewPedanticRegistry()
	if _, err := New(reg, reader); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP pipeline_operator_pipeline_rollout_deadline_timestamp_seconds For a Pipeline rolling out (Progressing True), when its steps' startup probes stop waiting for their models to load: the start of the rollout plus the longest of them (modelLoadTimeoutSeconds). PipelineStuckCreating allows for it.
# TYPE pipeline_operator_pipeline_rollout_deadline_timestamp_seconds gauge
pipeline_operator_pipeline_rollout_deadline_timestamp_seconds{namespace="vision",pipeline="facedetection-pipeline"} ` +
		strconv.FormatInt(start.Add(1800*time.Second).Unix(), 10) + "\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricRolloutDeadline); err != nil {
		t.Error(err)
	}
}

// A step that was Loading and is Ready records how long its model took to load; while it loads,
// the status collector exports since when; a deleted Pipeline's series go.
func TestModelLoadMetrics(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	loading := testenv.Sample(t, "vision")
	loading.Status.Steps = []pipelinev1.StepStatus{
		{Name: "facedetection-1", State: pipelinev1.StepStateLoading, LoadingSince: &since},
		{Name: "facedetection-2", State: pipelinev1.StepStatePending},
	}
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg, fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(loading).Build())
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP pipeline_operator_step_loading_since_timestamp_seconds For each step loading its model (state Loading), when the container that loads it started (status.steps[].loadingSince): time() minus it is how long the load has taken so far.
# TYPE pipeline_operator_step_loading_since_timestamp_seconds gauge
pipeline_operator_step_loading_since_timestamp_seconds{namespace="vision",pipeline="facedetection-pipeline",step="facedetection-1"} ` +
		strconv.FormatInt(since.Unix(), 10) + "\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricStepLoadingSince); err != nil {
		t.Error(err)
	}

	ready := *loading.Status.DeepCopy()
	ready.Steps[0].State, ready.Steps[0].LoadingSince = pipelinev1.StepStateReady, nil
	ready.Steps[1].State = pipelinev1.StepStateReady // it never loaded as far as the operator saw
	m.ObserveStatus(loading, loading.Status, ready, since.Add(95*time.Second))
	m.ObserveStatus(loading, ready, ready, since.Add(200*time.Second)) // nothing more loaded
	want = `
# HELP pipeline_operator_step_model_load_seconds How long each step's last model load took: from the start of the container that loaded it (status.steps[].loadingSince) to the step Ready, as the leading replica saw it.
# TYPE pipeline_operator_step_model_load_seconds gauge
pipeline_operator_step_model_load_seconds{namespace="vision",pipeline="facedetection-pipeline",step="facedetection-1"} 95
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), MetricStepModelLoad); err != nil {
		t.Error(err)
	}
	m.ForgetPipeline(client.ObjectKeyFromObject(loading))
	if n := testutil.CollectAndCount(m.modelLoad); n != 0 {
		t.Errorf("%d model load series left of a deleted Pipeline", n)
	}
}
