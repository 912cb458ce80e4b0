// Package rulecheck checks the operator's alerting rules and dashboard with Prometheus's own
// rule parser and query engine: every rule parses and carries what an on-call person needs, and
// each alert fires, and stays quiet, where it should.
package rulecheck

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v3"
)

var root = filepath.Join("..", "..", "..")

var promql = parser.NewParser(parser.Options{})

// loadRules reads the rule groups out of the PrometheusRule manifest.
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Kind string `yaml:"kind"`
		Spec yaml.Node
	}
	if err := yaml.Unmarshal(data, &manifest); err != nil || manifest.Kind != "PrometheusRule" {
		t.Fatalf("rules.yaml is not a PrometheusRule: %v", err)
	}
	spec, err := yaml.Marshal(&manifest.Spec)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, promql, nil)
	for _, err := range errs {
		t.Errorf("rules.yaml: %v", err)
	}
	if groups == nil {
		t.FailNow()
	}
	return groups
}

func TestRulesCarryWhatOnCallNeeds(t *testing.T) {
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			_, page, ok := strings.Cut(r.Annotations["runbook_url"], "/blob/main/")
			if !ok {
				t.Errorf("%s: runbook_url %q does not point into this repository", r.Alert, r.Annotations["runbook_url"])
				continue
			}
			if _, err := os.Stat(filepath.Join(root, page)); err != nil {
				t.Errorf("%s: runbook %s: %v", r.Alert, page, err)
			}
			if time.Duration(r.For) < time.Minute {
				t.Errorf("%s: for %s would page on every blip", r.Alert, r.For)
			}
		}
	}
}

// alertCase says whether an alert fires at the end of a series.
type alertCase struct {
	alert  string
	series string // promqltest "load 1m" lines
	after  time.Duration
	firing []string // a label value that identifies each firing alert
	// summary, when set, is what each firing alert's summary reads.
	summary string
}

// alertsByName are the alerting rules by alert name.
func alertsByName(t *testing.T) map[string]rulefmt.Rule {
	t.Helper()
	byName := map[string]rulefmt.Rule{}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			byName[r.Alert] = r
		}
	}
	return byName
}

var alertCases = []struct {
	name string
	alertCase
}{
	{"a failed pipeline fires after 5 minutes", alertCase{
		alert: "PipelineFailed", after: 6 * time.Minute,
		series: `pipeline_operator_pipeline_phase{namespace="edge",pipeline="face",phase="Failed"} 1x10`,
		firing: []string{"face"},
	}},
	{"a pipeline failed for 3 minutes does not", alertCase{
		alert: "PipelineFailed", after: 6 * time.Minute,
		series: `pipeline_operator_pipeline_phase{namespace="edge",pipeline="face",phase="Running"} 1x3 _x7
pipeline_operator_pipeline_phase{namespace="edge",pipeline="face",phase="Failed"} _x3 1x3`,
	}},
	{"a pipeline creating for 20 minutes fires", alertCase{
		alert: "PipelineStuckCreating", after: 20 * time.Minute,
		series: `pipeline_operator_pipeline_phase{namespace="edge",pipeline="slow",phase="Creating"} 1x25
pipeline_operator_pipeline_phase{namespace="edge",pipeline="fast",phase="Creating"} 1x2 _x23`,
		firing: []string{"slow"},
	}},
	{"a pipeline whose models may load for an hour does not fire after 20 minutes", alertCase{
		alert: "PipelineStuckCreating", after: 20 * time.Minute,
		series: `pipeline_operator_pipeline_phase{namespace="edge",pipeline="llm",phase="Creating"} 1x25
pipeline_operator_pipeline_rollout_deadline_timestamp_seconds{namespace="edge",pipeline="llm"} 3600x25`,
	}},
	{"a pipeline creating 15 minutes past its models' deadline fires", alertCase{
		alert: "PipelineStuckCreating", after: 50 * time.Minute,
		series: `pipeline_operator_pipeline_phase{namespace="edge",pipeline="llm",phase="Creating"} 1x55
pipeline_operator_pipeline_rollout_deadline_timestamp_seconds{namespace="edge",pipeline="llm"} 1800x55
pipeline_operator_pipeline_phase{namespace="edge",pipeline="larger",phase="Creating"} 1x55
pipeline_operator_pipeline_rollout_deadline_timestamp_seconds{namespace="edge",pipeline="larger"} 2400x55`,
		firing: []string{"llm"},
	}},
	{"a step short of ready pods for 10 minutes fires", alertCase{
		alert: "PipelineStepUnavailable", after: 12 * time.Minute,
		series: `pipeline_operator_step_replicas{namespace="edge",pipeline="face",step="detect"} 2x15
pipeline_operator_step_ready_replicas{namespace="edge",pipeline="face",step="detect"} 1x15
pipeline_operator_step_replicas{namespace="edge",pipeline="face",step="recognise"} 1x15
pipeline_operator_step_ready_replicas{namespace="edge",pipeline="face",step="recognise"} 1x15`,
		firing: []string{"detect"},
	}},
	{"a router answering 10% 5xx for 15 minutes fires", alertCase{
		alert: "PipelineRouterErrors", after: 20 * time.Minute,
		series: `pipeline_router_requests_total{namespace="edge",pipeline="face",code="200"} 0+90x25
pipeline_router_requests_total{namespace="edge",pipeline="face",code="503"} 0+10x25
pipeline_router_requests_total{namespace="edge",pipeline="calm",code="200"} 0+99x25
pipeline_router_requests_total{namespace="edge",pipeline="calm",code="502"} 0+1x25`,
		firing: []string{"face"},
	}},
	{"a router whose 5xx burst lasts 3 minutes does not", alertCase{
		alert: "PipelineRouterErrors", after: 20 * time.Minute,
		series: `pipeline_router_requests_total{namespace="edge",pipeline="face",code="200"} 0+90x25
pipeline_router_requests_total{namespace="edge",pipeline="face",code="503"} 0x10 0+50x3 150x12`,
	}},
	{"a step timing out on 20% of calls fires, 4xx answers do not", alertCase{
		alert: "PipelineRouterStepErrors", after: 20 * time.Minute,
		series: `pipeline_router_step_duration_seconds_count{namespace="edge",pipeline="face",step="detect"} 0+100x25
pipeline_router_step_errors_total{namespace="edge",pipeline="face",step="detect",reason="timeout"} 0+20x25
pipeline_router_step_duration_seconds_count{namespace="edge",pipeline="face",step="recognise"} 0+100x25
pipeline_router_step_errors_total{namespace="edge",pipeline="face",step="recognise",reason="client_error"} 0+50x25
pipeline_router_step_errors_total{namespace="edge",pipeline="face",step="recognise",reason="server_error"} 0+1x25`,
		firing: []string{"detect"},
	}},
	{"a step that fails every call, none answered, fires", alertCase{
		alert: "PipelineRouterStepErrors", after: 20 * time.Minute,
		series: `pipeline_router_step_duration_seconds_count{namespace="edge",pipeline="face",step="detect"} 0x25
pipeline_router_step_errors_total{namespace="edge",pipeline="face",step="detect",reason="connection"} 0+30x25`,
		firing: []string{"detect"},
	}},
	// The operator makes the series of a step with fallbackLocations exist at 0 from its first
	// pass: the series begins when the step does, and its first failover is an increase.
	{"a step failing over three times in an hour fires", alertCase{
		alert: "PipelineStepFailingOverRepeatedly", after: 40 * time.Minute,
		series: `pipeline_operator_step_failovers_total{namespace="edge",pipeline="face",step="detect"} _x5 0 1x10 2x10 3x20
pipeline_operator_step_failovers_total{namespace="edge",pipeline="face",step="recognise"} _x5 0 1x40`,
		firing:  []string{"detect"},
		summary: "Step detect of Pipeline edge/face keeps failing over.",
	}},
	{"the router failing over three times in an hour fires, named as the router", alertCase{
		alert: "PipelineStepFailingOverRepeatedly", after: 40 * time.Minute,
		series:  `pipeline_operator_step_failovers_total{namespace="edge",pipeline="face",step="router"} _x5 0 1x10 2x10 3x20`,
		firing:  []string{"router"},
		summary: "The router of Pipeline edge/face keeps failing over.",
	}},
	{"a series that began at its first failover would miss it", alertCase{
		alert: "PipelineStepFailingOverRepeatedly", after: 40 * time.Minute,
		series: `pipeline_operator_step_failovers_total{namespace="edge",pipeline="face",step="detect"} _x5 1x10 2x10 3x20`,
	}},
	{"failovers spread over more than an hour do not", alertCase{
		alert: "PipelineStepFailingOverRepeatedly", after: 150 * time.Minute,
		series: `pipeline_operator_step_failovers_total{namespace="edge",pipeline="face",step="detect"} 0x5 1x50 2x50 3x50`,
	}},
	{"no manager scraped for 5 minutes fires", alertCase{
		alert: "PipelineOperatorDown", after: 20 * time.Minute,
		series: `pipeline_operator_build_info{version="1.0.0"} 1x5`,
		firing: []string{"PipelineOperatorDown"},
	}},
	{"a manager scraped does not", alertCase{
		alert: "PipelineOperatorDown", after: 15 * time.Minute,
		series: `pipeline_operator_build_info{version="1.0.0",pod="a"} 1x5 _x10
pipeline_operator_build_info{version="1.0.0",pod="b"} _x3 1x12`,
	}},
	{"replicas up and none leading fires", alertCase{
		alert: "PipelineOperatorNoLeader", after: 15 * time.Minute,
		series: `pipeline_operator_build_info{pod="a"} 1x15
pipeline_operator_build_info{pod="b"} 1x15
leader_election_master_status{name="pipeline-operator.distri-infer.ndsl.cn",pod="a"} 1x5 0x10
leader_election_master_status{name="pipeline-operator.distri-infer.ndsl.cn",pod="b"} 0x15
leader_election_master_status{name="another-operator",pod="c"} 1x15`,
		firing: []string{"PipelineOperatorNoLeader"},
	}},
	{"replicas up that never reported leading fire too", alertCase{
		alert: "PipelineOperatorNoLeader", after: 15 * time.Minute,
		series: `pipeline_operator_build_info{pod="a"} 1x15`,
		firing: []string{"PipelineOperatorNoLeader"},
	}},
	{"a leadership handed over within 5 minutes does not, nor no manager at all", alertCase{
		alert: "PipelineOperatorNoLeader", after: 15 * time.Minute,
		series: `pipeline_operator_build_info{pod="a"} 1x8
pipeline_operator_build_info{pod="b"} 1x8
leader_election_master_status{name="pipeline-operator.distri-infer.ndsl.cn",pod="a"} 1x4 0x4
leader_election_master_status{name="pipeline-operator.distri-infer.ndsl.cn",pod="b"} 0x6 1x2`,
	}},
	{"a webhook answering 10% 5xx for 15 minutes fires, 400s to forged requests do not", alertCase{
		alert: "PipelineOperatorWebhookErrors", after: 20 * time.Minute,
		series: `controller_runtime_webhook_requests_total{webhook="/validate-distri-infer-ndsl-cn-v1-pipeline",code="200"} 0+90x25
controller_runtime_webhook_requests_total{webhook="/validate-distri-infer-ndsl-cn-v1-pipeline",code="503"} 0+10x25
controller_runtime_webhook_requests_total{webhook="/convert",code="200"} 0+10x25
controller_runtime_webhook_requests_total{webhook="/convert",code="400"} 0+90x25`,
		firing:  []string{"/validate-distri-infer-ndsl-cn-v1-pipeline"},
		summary: "The pipeline-operator webhook /validate-distri-infer-ndsl-cn-v1-pipeline fails 10% of its requests.",
	}},
	{"a webhook whose p99 is 8 s fires, one at 1 s does not", alertCase{
		alert: "PipelineOperatorWebhookSlow", after: 20 * time.Minute,
		series: `controller_runtime_webhook_latency_seconds_bucket{webhook="/convert",le="1"} 0+1x25
controller_runtime_webhook_latency_seconds_bucket{webhook="/convert",le="10"} 0+100x25
controller_runtime_webhook_latency_seconds_bucket{webhook="/convert",le="+Inf"} 0+100x25
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate-operator-writes",le="1"} 0+100x25
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate-operator-writes",le="10"} 0+100x25
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate-operator-writes",le="+Inf"} 0+100x25`,
		firing: []string{"/convert"},
	}},
	// The rule engine's clock starts at the epoch: an expiry of 10 days is 864000.
	{"a certificate 10 days from expiry warns after an hour", alertCase{
		alert: "PipelineOperatorCertificateExpiresSoon", after: 70 * time.Minute,
		series: `pipeline_operator_webhook_certificate_expiry_timestamp_seconds{pod="a"} 864000x80
pipeline_operator_webhook_certificate_expiry_timestamp_seconds{pod="b"} 864000000x80`,
		firing: []string{"PipelineOperatorCertificateExpiresSoon"},
	}},
	{"a certificate 60 days from expiry does not warn", alertCase{
		alert: "PipelineOperatorCertificateExpiresSoon", after: 70 * time.Minute,
		series: `pipeline_operator_webhook_certificate_expiry_timestamp_seconds 5184000x80`,
	}},
	{"a certificate 12 hours from expiry pages", alertCase{
		alert: "PipelineOperatorCertificateExpiresToday", after: 20 * time.Minute,
		series: `pipeline_operator_webhook_certificate_expiry_timestamp_seconds 43200x30`,
		firing: []string{"PipelineOperatorCertificateExpiresToday"},
	}},
	{"a certificate 10 days from expiry does not page", alertCase{
		alert: "PipelineOperatorCertificateExpiresToday", after: 20 * time.Minute,
		series: `pipeline_operator_webhook_certificate_expiry_timestamp_seconds 864000x30`,
	}},
	{"reconcile errors that keep coming fire", alertCase{
		alert: "PipelineOperatorReconcileErrors", after: 25 * time.Minute,
		series: `pipeline_operator_reconcile_errors_total{reason="ApplyFailed"} 0+3x30
pipeline_operator_reconcile_errors_total{reason="DeleteFailed"} 4x30`,
		firing: []string{"ApplyFailed"},
	}},
}

func TestAlertsFireWhereTheyShould(t *testing.T) {
	byName := alertsByName(t)
	covered := map[string]bool{}
	for _, tc := range alertCases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := byName[tc.alert]
			if !ok {
				t.Fatalf("no alert %s", tc.alert)
			}
			covered[tc.alert] = true
			got, summaries := evaluate(t, r, tc.series, tc.after)
			if strings.Join(got, ",") != strings.Join(tc.firing, ",") {
				t.Errorf("%s firing for %v, want %v", tc.alert, got, tc.firing)
			}
			for _, s := range summaries {
				if tc.summary != "" && s != tc.summary {
					t.Errorf("%s summary %q, want %q", tc.alert, s, tc.summary)
				}
			}
		})
	}
	for name := range byName {
		if !covered[name] {
			t.Errorf("alert %s has no case", name)
		}
	}
}

// everyReplica are the series that every replica of the manager exports, leader or not: the
// gauges it makes of the Pipelines in its cache at each scrape (internal/metrics's
// statusCollector). Counters of reconciles and failovers come from the leader alone.
var everyReplica = []string{
	"pipeline_operator_pipelines", "pipeline_operator_pipeline_phase",
	"pipeline_operator_step_replicas", "pipeline_operator_step_ready_replicas",
	"pipeline_operator_pipeline_rollout_deadline_timestamp_seconds",
	"pipeline_operator_step_loading_since_timestamp_seconds",
}

// Two replicas of the manager export each Pipeline's gauges, scraped as two targets (their pod
// labels differ): every alert still fires once per Pipeline or step, not once per replica.
func TestAlertsFireOncePerPipelineWithTwoReplicas(t *testing.T) {
	byName := alertsByName(t)
	for _, tc := range alertCases {
		var lines []string
		for line := range strings.SplitSeq(tc.series, "\n") {
			name, rest, ok := strings.Cut(line, "{")
			if !ok || !slices.Contains(everyReplica, name) {
				lines = append(lines, line)
				continue
			}
			for _, pod := range []string{"manager-0", "manager-1"} {
				lines = append(lines, name+`{pod="`+pod+`",`+rest)
			}
		}
		series := strings.Join(lines, "\n")
		if series == tc.series {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			got, _ := evaluate(t, byName[tc.alert], series, tc.after)
			if strings.Join(got, ",") != strings.Join(tc.firing, ",") {
				t.Errorf("%s firing for %v with two replicas, want %v", tc.alert, got, tc.firing)
			}
		})
	}
}

// evaluate runs the alerting rule every minute over the series, as Prometheus would, and returns
// an identifying label value of each alert firing at the end.
func evaluate(t *testing.T, r rulefmt.Rule, series string, after time.Duration) (firing, summaries []string) {
	t.Helper()
	storage := promqltest.LoadedStorage(t, "load 1m\n  "+strings.ReplaceAll(series, "\n", "\n  "))
	engine := promqltest.NewTestEngine(t, false, 0, 100000)
	expr, err := promql.ParseExpr(r.Expr)
	if err != nil {
		t.Fatal(err)
	}
	rule := rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), 0, labels.FromMap(r.Labels),
		labels.FromMap(r.Annotations), labels.EmptyLabels(), "", true, nil)
	query := rules.EngineQueryFunc(engine, storage)
	start := time.Unix(0, 0).UTC()
	for ts := start; !ts.After(start.Add(after)); ts = ts.Add(time.Minute) {
		if _, err := rule.Eval(context.Background(), 0, ts, query, nil, 0); err != nil {
			t.Fatalf("evaluate %s at %s: %v", r.Alert, ts, err)
		}
	}
	for _, a := range rule.ActiveAlerts() {
		if a.State != rules.StateFiring {
			continue
		}
		summaries = append(summaries, a.Annotations.Get("summary"))
		// An alert of the operator as a whole has none of these: its name identifies it.
		id := a.Labels.Get("alertname")
		for _, name := range []string{"pipeline", "reason", "webhook"} {
			if v := a.Labels.Get(name); v != "" {
				if name == "pipeline" && a.Labels.Get("step") != "" {
					v = a.Labels.Get("step")
				}
				id = v
				break
			}
		}
		firing = append(firing, id)
	}
	return firing, summaries
}

// phases are the values of the phase label of pipeline_operator_pipeline_phase and
// pipeline_operator_pipelines: the v1 phases, and Unknown for a Pipeline not reported on yet.
var phases = map[string]bool{"Creating": true, "Running": true, "Failed": true, "Deleting": true, "Unknown": true}

// checkPhaseMatchers reports every matcher on the phase label in expr whose value is not a phase
// the operator reports (a lower-case v1beta1 phase, say), which would select nothing.
func checkPhaseMatchers(t *testing.T, where string, expr parser.Expr) {
	t.Helper()
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == "phase" && (m.Type == labels.MatchEqual || m.Type == labels.MatchNotEqual) && !phases[m.Value] {
				t.Errorf("%s: %s matches phase %q, which the operator never reports", where, vs, m.Value)
			}
		}
		return nil
	})
}

// The rules and the dashboard select phases by the values the operator reports.
func TestPhaseMatchersNameReportedPhases(t *testing.T) {
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			expr, err := promql.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			checkPhaseMatchers(t, "rule "+r.Alert, expr)
		}
	}
	for _, q := range dashboardQueries(t) {
		expr, err := promql.ParseExpr(q.expr)
		if err != nil {
			t.Fatalf("panel %q: %q: %v", q.panel, q.expr, err)
		}
		checkPhaseMatchers(t, "panel "+q.panel, expr)
	}
}

// dashboardQuery is the query of one target of a panel of the dashboard, as Prometheus gets it.
type dashboardQuery struct {
	panel, expr string
}

// dashboard is what the tests read of config/grafana/pipeline-operator.json.
type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
			IncludeAll bool   `json:"includeAll"`
			AllValue   string `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// loadDashboard reads the dashboard.
func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config", "grafana", "pipeline-operator.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash dashboard
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	return dash
}

// dashboardQueries are the queries of every panel of the dashboard, as Grafana sends them with
// every namespace and Pipeline chosen: $__rate_interval, $namespace and $pipeline replaced.
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	var out []dashboardQuery
	for _, p := range loadDashboard(t).Panels {
		for _, target := range p.Targets {
			// Grafana replaces the variables before Prometheus sees the query; "All" is their
			// allValue, .*.
			expr := strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*", "$pipeline", ".*").Replace(target.Expr)
			out = append(out, dashboardQuery{panel: p.Title, expr: expr})
		}
	}
	return out
}

// The dashboard reads the gauges every replica exports through max or min by the labels it
// shows: a sum or count, or the raw series, would count each Pipeline once per replica.
func TestDashboardCountsEachPipelineOnce(t *testing.T) {
	for _, q := range dashboardQueries(t) {
		expr, err := promql.ParseExpr(q.expr)
		if err != nil {
			t.Fatal(err)
		}
		parser.Inspect(expr, func(node parser.Node, path []parser.Node) error {
			vs, ok := node.(*parser.VectorSelector)
			if !ok || !slices.Contains(everyReplica, vs.Name) {
				return nil
			}
			var agg *parser.AggregateExpr
			for _, n := range slices.Backward(path) {
				if a, ok := n.(*parser.AggregateExpr); ok {
					agg = a
					break
				}
			}
			if agg == nil || (agg.Op != parser.MAX && agg.Op != parser.MIN) {
				t.Errorf("panel %q reads %s per replica: %s", q.panel, vs.Name, q.expr)
			}
			return nil
		})
	}
}

func TestDashboardQueriesParse(t *testing.T) {
	dash := loadDashboard(t)
	if dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard has uid %q and %d panels", dash.UID, len(dash.Panels))
	}
	for _, q := range dashboardQueries(t) {
		if _, err := promql.ParseExpr(q.expr); err != nil {
			t.Errorf("panel %q: %q: %v", q.panel, q.expr, err)
		}
	}
}

// perPipeline are the metrics whose series carry a Pipeline's namespace and name.
var perPipeline = map[string]bool{
	"pipeline_operator_pipeline_phase": true, "pipeline_operator_step_replicas": true, "pipeline_operator_step_ready_replicas": true,
	"pipeline_operator_step_failovers_total": true, "pipeline_router_requests_total": true,
	"pipeline_router_step_duration_seconds_bucket": true, "pipeline_router_request_duration_seconds_bucket": true, "pipeline_router_step_errors_total": true,
	"pipeline_router_step_retries_total": true, "pipeline_router_step_retries_budget_exhausted_total": true,
}

// The dashboard can be narrowed to namespaces and Pipelines: its variables list them, and every
// panel of per-Pipeline series follows them.
func TestDashboardFiltersByNamespaceAndPipeline(t *testing.T) {
	dash := loadDashboard(t)
	want := map[string]string{
		"namespace": "label_values(pipeline_operator_pipeline_phase, namespace)",
		"pipeline":  `label_values(pipeline_operator_pipeline_phase{namespace=~"$namespace"}, pipeline)`,
	}
	for _, v := range dash.Templating.List {
		if def, ok := want[v.Name]; ok {
			if v.Definition != def || !v.IncludeAll || v.AllValue != ".*" {
				t.Errorf("variable %s: %q, includeAll %t, allValue %q; want %q, All as .*", v.Name, v.Definition, v.IncludeAll, v.AllValue, def)
			}
			delete(want, v.Name)
		}
	}
	for name := range want {
		t.Errorf("no variable %s", name)
	}
	filtered := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			expr, err := promql.ParseExpr(strings.ReplaceAll(target.Expr, "$__rate_interval", "5m"))
			if err != nil {
				t.Fatal(err)
			}
			parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
				vs, ok := node.(*parser.VectorSelector)
				if !ok || !perPipeline[vs.Name] {
					return nil
				}
				filtered++
				matched := map[string]bool{}
				for _, m := range vs.LabelMatchers {
					if m.Type == labels.MatchRegexp && m.Value == "$"+m.Name {
						matched[m.Name] = true
					}
				}
				if !matched["namespace"] || !matched["pipeline"] {
					t.Errorf("panel %q: %s does not follow $namespace and $pipeline", p.Title, vs)
				}
				return nil
			})
		}
	}
	if filtered == 0 {
		t.Error("no panel shows per-Pipeline series")
	}
}
