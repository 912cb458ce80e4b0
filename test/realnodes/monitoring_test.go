package realnodes

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/test/netns"
)

// The monitoring test's environment, set by make test-realnodes.
var (
	// prometheusBin is a real Prometheus server (hack/tools/prometheus).
	prometheusBin = os.Getenv("REALNODES_PROMETHEUS")
	// prometheusConfigBin writes the Prometheus Operator's configuration for monitors
	// (hack/tools/prometheus-config).
	prometheusConfigBin = os.Getenv("REALNODES_PROMETHEUS_CONFIG")
	// monitoringManifest is config/prometheus as kustomize builds it: the ServiceMonitor,
	// PodMonitor and PrometheusRule a user applies.
	monitoringManifest = os.Getenv("REALNODES_MONITORING")
)

const (
	// prometheusAddr is where Prometheus serves, inside the cluster's network namespace.
	prometheusAddr = "127.0.0.1:19090"
	// alertFor is the `for` of every alert in the test, instead of the minutes of the shipped
	// rules: the expressions are the shipped ones, the waits are not.
	alertFor = "5s"
	// tokenPath is where the ServiceMonitor says Prometheus's ServiceAccount token is, in a pod.
	tokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"
)

// An alert as Prometheus reports it.
type alert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
}

// String names an alert by its name and its Pipeline's labels.
func (a alert) String() string {
	s := a.Labels["alertname"] + "{" + a.Labels["namespace"] + "/" + a.Labels["pipeline"]
	if step := a.Labels["step"]; step != "" {
		s += "/" + step
	}
	if reason := a.Labels["reason"]; reason != "" {
		s += " " + reason
	}
	return s + "}"
}

// The shipped monitoring, end to end: a real Prometheus, configured as the Prometheus Operator
// configures one for config/prometheus's ServiceMonitor and PodMonitor (its own generator) and
// evaluating the shipped alerting rules, scrapes the real manager and the real routers. Two
// Pipelines of the same name in two namespaces go wrong in different ways, and each alert fires
// for its own Pipeline only, named by the Pipeline's namespace (not the operator's) and name;
// once both are repaired every alert resolves. Then the manager goes away and comes back:
// PipelineOperatorDown fires and resolves.
func TestAlertsNameTheirPipeline(t *testing.T) {
	prom := startPrometheus(t)
	prom.waitTargets(t, "the manager", `up{service="pipeline-operator-controller-manager-metrics-service"} == 1`, 2)
	prom.checkOperatorSeries(t)

	// Pipeline iris in namespace a waits for a claim that is not bound: it stays Creating past
	// the time its steps' startup probes allow (modelLoadTimeoutSeconds 10).
	a := namespace(t, "mon-a")
	claim := modelsManifest(t, a)
	applyDocs(t, claim, "PersistentVolumeClaim")
	pa := irisPipeline(a)
	for i := range pa.Spec.Steps {
		pa.Spec.Steps[i].ModelLoadTimeoutSeconds = ptr.To(int32(10))
	}
	// Pipeline iris in namespace b has a step whose model is not there: its server exits, the
	// Pipeline fails, and the router's calls to it fail.
	b := namespace(t, "mon-b")
	createModels(t, b)
	pb := irisPipeline(b)
	pb.Spec.Steps[1].Model = "no-such-model"
	for _, p := range []*pipelinev1.Pipeline{pa, pb} {
		if err := admin.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	prom.waitTargets(t, "the routers of both", fmt.Sprintf(`count by (namespace) (up{pipeline="iris", namespace=~"%s|%s"} == 1)`, a, b), 2)
	// The router answers before its models are checked; once scale serves, its calls to
	// classify fail (and only those).
	waitStep(t, types.NamespacedName{Namespace: b, Name: "iris"}, "scale", "Ready", 2*time.Minute,
		func(s pipelinev1.StepStatus) bool { return s.State == pipelinev1.StepStateReady })
	stop := sendUntilStopped(t, "http://"+net.JoinHostPort(routerPodIP(t, b), "8080"), false)
	firing := []string{
		"PipelineStuckCreating{" + a + "/iris}",
		"PipelineStepUnavailable{" + a + "/iris/scale}",
		"PipelineStepUnavailable{" + a + "/iris/classify}",
		"PipelineFailed{" + b + "/iris}",
		"PipelineStepUnavailable{" + b + "/iris/classify}",
		"PipelineRouterErrors{" + b + "/iris}",
		"PipelineRouterStepErrors{" + b + "/iris/classify}",
	}
	fired := prom.waitAlerts(t, inNamespaces(a, b), firing, 4*time.Minute)
	stop()
	prom.checkWaitedForModels(t, a, fired)
	prom.checkPipelineNamespaces(t)

	// Both repaired: a's claim binds, b's step names its model. Requests that the routers answer
	// bring their error ratios down.
	applyDocs(t, claim, "PersistentVolume")
	if err := admin.Patch(context.Background(), pb, client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/spec/steps/1/model","value":"iris-classifier"}]`))); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{a, b} {
		stepStates(t, types.NamespacedName{Namespace: ns, Name: "iris"}, 3*time.Minute)
	}
	var stops []func()
	for _, ns := range []string{a, b} {
		stops = append(stops, sendUntilStopped(t, fmt.Sprintf("http://iris-router.%s.svc.cluster.local", ns), true))
	}
	prom.waitAlerts(t, inNamespaces(a, b), nil, 4*time.Minute)
	for _, stop := range stops {
		stop()
	}

	// The operator goes away: PipelineOperatorDown fires, and resolves when it is back. (The
	// other operator alerts read the operator's own series over the last minutes, which a
	// reconcile error of the test's repairs may have made fire: they are not what this checks.)
	liveness := named("PipelineOperatorDown", "PipelineOperatorNoLeader")
	scaleManager(t, 0)
	t.Cleanup(func() { scaleManager(t, 2) })
	prom.waitAlerts(t, liveness, []string{"PipelineOperatorDown{/}"}, 2*time.Minute)
	scaleManager(t, 2)
	if err := waitServing(); err != nil {
		t.Fatal(err)
	}
	prom.waitAlerts(t, liveness, nil, 2*time.Minute)
	for _, a := range prom.alerts(t) {
		if a.State == "firing" && a.Labels["pipeline"] == "" {
			t.Logf("firing besides: %v", a)
		}
	}
}

// checkOperatorSeries checks that the series the operator's alerts read are scraped, with
// values that keep those alerts quiet.
func (p *prometheus) checkOperatorSeries(t *testing.T) {
	t.Helper()
	for expr, want := range map[string]string{
		`count(pipeline_operator_build_info)`:                                                                                                     "2",
		`sum(leader_election_master_status{name="pipeline-operator.distri-infer.ndsl.cn"})`:                                                       "1",
		`min(pipeline_operator_webhook_certificate_expiry_timestamp_seconds) - time() > 14 * 86400`:                                               "",
		`count(sum by (webhook) (controller_runtime_webhook_requests_total{webhook=~"/(mutate|validate)-distri-infer-ndsl-cn-v1-pipeline"}) > 0)`: "2",
	} {
		if got := p.scalar(t, expr); got == "none" || (want != "" && got != want) {
			t.Errorf("%s = %s, want %s", expr, got, cmp.Or(want, "a value"))
		}
	}
}

// checkWaitedForModels checks that PipelineStuckCreating of the Pipeline in ns, among the alerts
// fired, became active only once the time its models may take to load was over.
func (p *prometheus) checkWaitedForModels(t *testing.T, ns string, fired []alert) {
	t.Helper()
	deadline, err := strconv.ParseFloat(p.scalar(t, fmt.Sprintf(`max(pipeline_operator_pipeline_rollout_deadline_timestamp_seconds{namespace=%q})`, ns)), 64)
	if err != nil {
		t.Fatalf("the rollout deadline of %s/iris: %v", ns, err)
	}
	for _, al := range fired {
		if al.Labels["alertname"] == "PipelineStuckCreating" && al.ActiveAt.Before(time.Unix(int64(deadline), 0)) {
			t.Errorf("%v was active at %s, before the rollout deadline %s", al, al.ActiveAt, time.Unix(int64(deadline), 0))
		}
	}
}

// checkPipelineNamespaces checks that no series of a Pipeline names the operator's namespace,
// or moves the Pipeline's to exported_namespace (Prometheus's default without honorLabels).
func (p *prometheus) checkPipelineNamespaces(t *testing.T) {
	t.Helper()
	for _, expr := range []string{
		fmt.Sprintf(`{__name__=~"pipeline_.+", pipeline!="", namespace=%q}`, operatorNamespace),
		`{exported_namespace!=""}`,
	} {
		if series, _, err := p.query(expr); err != nil || len(series) > 0 {
			t.Errorf("%s: %v %v", expr, series, err)
		}
	}
}

// prometheus is a real Prometheus server running in the cluster's network namespace.
type prometheus struct {
	hc *http.Client
}

// startPrometheus writes the Prometheus Operator's configuration for the shipped monitors and
// the shipped rules (their `for` shortened to alertFor) and starts Prometheus on them, in the
// cluster's network namespace, as a ServiceAccount bound to the metrics reader ClusterRole.
func startPrometheus(t *testing.T) *prometheus {
	t.Helper()
	dir := t.TempDir()
	// The configuration is for the Prometheus that runs it, by the version it says it is.
	out, err := exec.Command(prometheusBin, "--version").Output()
	var version string
	if _, scanErr := fmt.Sscanf(string(out), "prometheus, version %s", &version); err != nil || scanErr != nil {
		t.Fatalf("%s --version: %v %v: %s", prometheusBin, err, scanErr, out)
	}
	pki := filepath.Join(clusterDir, "pki")
	gen := exec.Command(prometheusConfigBin, "-kubeconfig", filepath.Join(clusterDir, "kubeconfig"),
		"-monitors", monitoringManifest, "-namespace", operatorNamespace, "-prometheus-version", version,
		"-apiserver", "https://172.30.0.1:6443", "-apiserver-ca", filepath.Join(pki, "ca.crt"),
		"-apiserver-cert", filepath.Join(pki, "admin.crt"), "-apiserver-key", filepath.Join(pki, "admin.key"),
		"-scrape-interval", "2s", "-evaluation-interval", "1s")
	var stderr bytes.Buffer
	gen.Stderr = &stderr
	generated, err := gen.Output()
	if err != nil {
		t.Fatalf("prometheus-config: %v: %s", err, stderr.String())
	}
	if !bytes.Contains(generated, []byte(tokenPath)) {
		t.Fatalf("the generated configuration reads no token from %s:\n%s", tokenPath, generated)
	}
	// What the Prometheus Operator's config reloader does for the pod it runs in: replace
	// $(SHARD) and $(POD_NAME) by the environment's. The token is the test's.
	generated = []byte(strings.NewReplacer("$(SHARD)", "0", "$(POD_NAME)", "prometheus-k8s-0", tokenPath, filepath.Join(dir, "token")).Replace(string(generated)))
	config := map[string]any{}
	if err := yaml.Unmarshal(generated, &config); err != nil {
		t.Fatal(err)
	}
	config["rule_files"] = []string{writeRules(t, dir)}
	writeYAML(t, filepath.Join(dir, "prometheus.yaml"), config)
	writeToken(t, filepath.Join(dir, "token"))

	cmd := exec.Command("nsenter", "--net="+netnsPath, prometheusBin,
		"--config.file="+filepath.Join(dir, "prometheus.yaml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+prometheusAddr, "--log.level=warn")
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("Prometheus's log:\n%s", log)
		}
	})
	p := &prometheus{hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: netns.Dialer(netnsPath)}}}
	eventually(t, time.Minute, "Prometheus ready", func() error {
		_, err := p.get("/-/ready")
		return err
	})
	return p
}

// writeRules writes the rule groups of the shipped PrometheusRule as a rule file, each `for`
// shortened to alertFor.
func writeRules(t *testing.T, dir string) string {
	t.Helper()
	var groups []any
	for _, doc := range documents(t, monitoringManifest) {
		if doc["kind"] != "PrometheusRule" {
			continue
		}
		spec, _ := doc["spec"].(map[string]any)
		for _, g := range spec["groups"].([]any) {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				if rule := r.(map[string]any); rule["for"] != nil {
					rule["for"] = alertFor
				}
			}
			groups = append(groups, g)
		}
	}
	if len(groups) == 0 {
		t.Fatalf("%s has no PrometheusRule", monitoringManifest)
	}
	path := filepath.Join(dir, "rules.yaml")
	writeYAML(t, path, map[string]any{"groups": groups})
	return path
}

// writeToken binds a ServiceAccount to the metrics reader ClusterRole, as a user does for
// Prometheus, and writes a token of it.
func writeToken(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	ns := namespace(t, "prometheus")
	sa, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pipeline-operator-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
}

// get GETs a path of Prometheus's API and returns its data.
func (p *prometheus) get(path string) (json.RawMessage, error) {
	resp, err := p.hc.Get("http://" + prometheusAddr + path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	var r struct {
		Data json.RawMessage `json:"data"`
	}
	if strings.HasPrefix(path, "/api/") {
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, err
		}
	}
	return r.Data, nil
}

// query evaluates an instant query: each series' labels and value.
func (p *prometheus) query(expr string) ([]map[string]string, []string, error) {
	data, err := p.get("/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, nil, err
	}
	var r struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, nil, err
	}
	var series []map[string]string
	var values []string
	for _, s := range r.Result {
		series = append(series, s.Metric)
		values = append(values, fmt.Sprint(s.Value[1]))
	}
	return series, values, nil
}

// scalar is the value of a query of one series, "none" when it has none.
func (p *prometheus) scalar(t *testing.T, expr string) string {
	t.Helper()
	_, values, err := p.query(expr)
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != 1 {
		return "none"
	}
	return values[0]
}

// waitTargets waits until a query of up returns n series.
func (p *prometheus) waitTargets(t *testing.T, what, expr string, n int) {
	t.Helper()
	eventually(t, 2*time.Minute, fmt.Sprintf("Prometheus scrapes %s", what), func() error {
		series, _, err := p.query(expr)
		if err != nil {
			return err
		}
		if len(series) != n {
			data, _ := p.get("/api/v1/targets?state=active")
			return fmt.Errorf("%d of %d series of %s; targets: %.3000s", len(series), n, expr, data)
		}
		return nil
	})
}

// alerts are the alerts Prometheus has, pending or firing.
func (p *prometheus) alerts(t *testing.T) []alert {
	t.Helper()
	data, err := p.get("/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Alerts []alert `json:"alerts"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r.Alerts
}

// inNamespaces selects the alerts of Pipelines in the namespaces.
func inNamespaces(namespaces ...string) func(alert) bool {
	return func(a alert) bool { return slices.Contains(namespaces, a.Labels["namespace"]) }
}

// named selects the alerts of the names.
func named(names ...string) func(alert) bool {
	return func(a alert) bool { return slices.Contains(names, a.Labels["alertname"]) }
}

// waitAlerts waits until the firing alerts that selected selects are exactly want, and returns
// them.
func (p *prometheus) waitAlerts(t *testing.T, selected func(alert) bool, want []string, timeout time.Duration) []alert {
	t.Helper()
	slices.Sort(want)
	start := time.Now()
	var since []string
	var firing []alert
	eventually(t, timeout, fmt.Sprintf("firing alerts %v", want), func() error {
		var got []string
		since, firing = since[:0], firing[:0]
		for _, a := range p.alerts(t) {
			if a.State == "firing" && selected(a) {
				got = append(got, a.String())
				firing = append(firing, a)
				since = append(since, fmt.Sprintf("%s active %s before", a, time.Since(a.ActiveAt).Round(time.Second)))
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("firing: %v", got)
		}
		return nil
	})
	t.Logf("firing after %s: %v", time.Since(start).Round(time.Second), since)
	return firing
}

// sendUntilStopped sends the iris request to a router until the returned function is called,
// requiring answers of 200 (ok) or of 5xx (!ok).
func sendUntilStopped(t *testing.T, router string, ok bool) func() {
	t.Helper()
	hc := clusterHTTP()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int]int{}
	wg.Go(func() {
		body := `{"inputs":[{"name":"features","datatype":"FP32","shape":[1,4],"data":[[5.1,3.5,1.4,0.2]]}]}`
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, router, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			code := 0
			if resp, err := hc.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				code = resp.StatusCode
			} else if ctx.Err() != nil {
				break // stopped
			}
			mu.Lock()
			counts[code]++
			mu.Unlock()
			if !ok {
				time.Sleep(200 * time.Millisecond)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		t.Logf("%s answered %v", router, counts)
		for code, n := range counts {
			if ok && code != http.StatusOK || !ok && code < 500 && code != 0 {
				t.Errorf("%s answered %d %d times", router, code, n)
			}
		}
	}
}

// routerPodIP is the IP of the router pod of Pipeline iris in ns.
func routerPodIP(t *testing.T, ns string) string {
	t.Helper()
	var ip string
	eventually(t, 2*time.Minute, "router pod of "+ns+"/iris running", func() error {
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=pipeline-router"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				ip = p.Status.PodIP
				return nil
			}
		}
		return fmt.Errorf("%d router pods, none running", len(pods.Items))
	})
	return ip
}

// scaleManager sets the replicas of the manager's Deployment.
func scaleManager(t *testing.T, replicas int) {
	t.Helper()
	if _, err := kubectlRun("-n", operatorNamespace, "scale", "deployment/pipeline-operator-controller-manager", fmt.Sprintf("--replicas=%d", replicas)); err != nil {
		t.Error(err)
	}
}
