package operator

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// This file is the cluster side of `make bench`: each side of a comparison runs in a fresh
// kube-apiserver and etcd of its own, the operator as the manager binary (cmd/) in a process of
// its own with its admission webhooks registered and served, and the figures of every process
// read from the kernel and from the processes' own profiling endpoints.

// benchVariant is an operator to measure: a manager binary and the repository whose config/
// (CRDs, webhook configurations) it ships with.
type benchVariant struct {
	name   string
	binary string
	repo   string
}

// benchSide is one side of a comparison: the floor (variant nil) or an operator.
type benchSide struct {
	variant *benchVariant
}

func (s benchSide) name() string {
	if s.variant == nil {
		return "floor"
	}
	return s.variant.name
}

// buildVariant builds the manager of the repository at repo into dir.
func buildVariant(t *testing.T, name, repo, dir string) *benchVariant {
	t.Helper()
	bin := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
	build := exec.Command("go", "build", "-o", bin, "./cmd")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd in %s: %v: %s", repo, err, out)
	}
	return &benchVariant{name: name, binary: bin, repo: repo}
}

// checkout makes a worktree of rev of this repository in a temporary directory, removed when
// the test ends.
func checkout(t *testing.T, rev string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "before")
	add := exec.Command("git", "worktree", "add", "--detach", dir, rev)
	add.Dir = testenv.RepoPath()
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("git worktree add %s: %v: %s", rev, err, out)
	}
	t.Cleanup(func() {
		rm := exec.Command("git", "worktree", "remove", "--force", dir)
		rm.Dir = testenv.RepoPath()
		_ = rm.Run()
	})
	return dir
}

// sideEnv is the control plane of one side, and its operator process when it has one.
type sideEnv struct {
	env      *envtest.Environment
	cfg      *rest.Config
	c        client.Client
	http     *http.Client // to the apiserver, as its administrator
	operator *benchProcess
	stop     func()
}

// startSide starts a fresh kube-apiserver and etcd with room for thousands of Services and the
// CRDs of the side's repository. An operator side gets the webhook configurations of that
// repository, pointed at 127.0.0.1, and the operator's manager serving them; the floor's
// apiserver calls no admission webhook. Every client writes v1, the stored version, so no
// request is converted; the floor's conversion webhook is served all the same.
// args are the operator's flags beyond those that connect it to the side.
func startSide(t *testing.T, s benchSide, args ...string) *sideEnv {
	t.Helper()
	repo := testenv.RepoPath()
	if s.variant != nil {
		repo = s.variant.repo
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repo, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                runtimeScheme(),
	}
	if s.variant != nil {
		env.WebhookInstallOptions.Paths = []string{filepath.Join(repo, "config", "webhook", "manifests.yaml")}
	}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/12")
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	se := &sideEnv{env: env, cfg: cfg}
	se.stop = func() {
		cancel()
		if se.operator != nil {
			se.operator.stop()
		}
		_ = env.Stop()
	}
	ok := false
	defer func() {
		if !ok {
			se.stop()
		}
	}()
	cfg.QPS, cfg.Burst = -1, 0 // as ctrl.GetConfig: the apiserver's priority and fairness limits, not the client's
	if se.c, err = client.New(cfg, benchScheme()); err != nil {
		t.Fatal(err)
	}
	if se.http, err = rest.HTTPClientFor(cfg); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"warmup", "bench"} {
		if err := se.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	if s.variant == nil {
		if err := testenv.ServeConversion(ctx, env); err != nil {
			t.Fatal(err)
		}
	} else {
		se.operator = startOperatorProcess(t, env, cfg, s.variant, args...)
		se.waitAdmission(t)
	}
	ok = true
	return se
}

// waitAdmission waits until a Pipeline passes the operator's webhooks (a dry run).
func (se *sideEnv) waitAdmission(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		p := benchPipeline("warmup", 0)
		p.Name = "admission-probe"
		err := se.c.Create(context.Background(), p, client.DryRunAll)
		if err == nil {
			return
		}
		if se.operator.exited() || time.Now().After(deadline) {
			t.Fatalf("the operator's webhooks do not admit a Pipeline: %v\n%s", err, se.operator.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// benchProcess is a manager binary running against a side's apiserver.
type benchProcess struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startOperatorProcess runs v's manager as the operator's image runs it, as a user of its own
// with the rights of cluster administrators (RBAC is not what is measured), serving the
// webhooks where env pointed the apiserver, with certificates envtest made; extra are more flags.
func startOperatorProcess(t *testing.T, env *envtest.Environment, cfg *rest.Config, v *benchVariant, extra ...string) *benchProcess {
	t.Helper()
	user, err := env.AddUser(envtest.User{Name: "pipeline-operator", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "bench-operator-")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	wio := env.WebhookInstallOptions
	args := append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--webhook-cert-dir=" + wio.LocalServingCertDir, "--webhook-port=" + strconv.Itoa(wio.LocalServingPort)}, extra...)
	p := &benchProcess{log: filepath.Join(dir, "manager.log"), done: make(chan struct{})}
	log, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(v.binary, args...)
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+path, "OPERATOR_CONDITION_NAME=", resources.EnvRouterImage+"=router:bench")
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(); _ = os.RemoveAll(dir) })
	return p
}

func (p *benchProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the manager as the kubelet does (SIGTERM), then kills it after 10 s.
func (p *benchProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *benchProcess) logTail() string {
	data, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// round runs the side's work for n Pipelines in namespace ns and returns when every one has
// converged: the floor writes everything itself; an operator side creates the Pipelines and
// waits for the operator.
func (se *sideEnv) round(t *testing.T, ns string, n int) time.Duration {
	t.Helper()
	if se.operator == nil {
		return floorRound(t, se.c, ns, n)
	}
	wait := watchConverged(t, se.cfg, ns, n)
	start := time.Now()
	if err := parallel(n, func(i int) error { return se.c.Create(context.Background(), benchPipeline(ns, i)) }); err != nil {
		t.Fatal(err)
	}
	wait()
	if se.operator.exited() {
		t.Fatalf("the operator exited:\n%s", se.operator.logTail())
	}
	return time.Since(start)
}

// cpuTimes are the CPU times (user and system) of the processes of a side.
type cpuTimes struct {
	apiserver, etcd, operator, bench time.Duration
}

func (a cpuTimes) sub(b cpuTimes) cpuTimes {
	return cpuTimes{a.apiserver - b.apiserver, a.etcd - b.etcd, a.operator - b.operator, a.bench - b.bench}
}

// cpu reads the CPU times of the side's kube-apiserver, etcd and operator from /proc, and of
// this process (the writers, the watch of the run) from getrusage.
func (se *sideEnv) cpu(t *testing.T) cpuTimes {
	t.Helper()
	var ct cpuTimes
	for _, pid := range childPIDs(t) {
		switch processName(pid) {
		case "kube-apiserver":
			ct.apiserver += processCPU(pid)
		case "etcd":
			ct.etcd += processCPU(pid)
		}
	}
	if se.operator != nil {
		ct.operator = processCPU(se.operator.cmd.Process.Pid)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		ct.bench = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return ct
}

// childPIDs lists the processes whose parent is this one.
func childPIDs(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(pid); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStat returns the fields of /proc/pid/stat after the command's name: state, ppid, ...
func procStat(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(data[i+1:]))
}

func processName(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(data))
}

// clockTicks is the kernel's USER_HZ, in which /proc reports CPU times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// processCPU is the user and system time of pid.
func processCPU(pid int) time.Duration {
	f := procStat(pid)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// webhookStats are the apiserver's counts and summed latencies of the admission webhooks it
// called, by webhook name, and of the SubjectAccessReviews it answered.
type webhookStats struct {
	calls   map[string]float64
	seconds map[string]float64
	reviews float64
}

// webhooks reads the apiserver's metrics.
func (se *sideEnv) webhooks(t *testing.T) webhookStats {
	t.Helper()
	ws := webhookStats{calls: map[string]float64{}, seconds: map[string]float64{}}
	forEachSample(se.get(t, "/metrics"), func(name string, labels map[string]string, value float64) {
		switch name {
		case "apiserver_admission_webhook_admission_duration_seconds_count":
			ws.calls[labels["name"]] += value
		case "apiserver_admission_webhook_admission_duration_seconds_sum":
			ws.seconds[labels["name"]] += value
		case "apiserver_request_total":
			if labels["resource"] == "subjectaccessreviews" && labels["verb"] == "POST" {
				ws.reviews += value
			}
		}
	})
	return ws
}

func (a webhookStats) sub(b webhookStats) webhookStats {
	d := webhookStats{calls: map[string]float64{}, seconds: map[string]float64{}, reviews: a.reviews - b.reviews}
	for k, v := range a.calls {
		d.calls[k] = v - b.calls[k]
		d.seconds[k] = a.seconds[k] - b.seconds[k]
	}
	return d
}

// metricLine parses one sample of the Prometheus text format: name{a="b",...} value.
func metricLine(line string) (string, map[string]string, float64, bool) {
	if line == "" || line[0] == '#' {
		return "", nil, 0, false
	}
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", nil, 0, false
	}
	value, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return "", nil, 0, false
	}
	head := line[:sp]
	name, rest, hasLabels := strings.Cut(head, "{")
	labels := map[string]string{}
	if hasLabels {
		for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
	}
	return name, labels, value, true
}

// forEachSample calls f with every sample of a Prometheus text exposition.
func forEachSample(body []byte, f func(name string, labels map[string]string, value float64)) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if name, labels, value, ok := metricLine(sc.Text()); ok {
			f(name, labels, value)
		}
	}
}

// httpGet reads url with c; any answer but 200 is an error.
func httpGet(c *http.Client, url string) ([]byte, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, err
}

// get reads path from the side's apiserver as its administrator.
func (se *sideEnv) get(t *testing.T, path string) []byte {
	t.Helper()
	body, err := httpGet(se.http, strings.TrimSuffix(se.cfg.Host, "/")+path)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// profileFor starts a CPU profile of the side's apiserver, and of its operator when pprofAddr
// is where the operator serves Go's profiling endpoints, for d, and returns a function that
// waits for them.
func (se *sideEnv) profileFor(t *testing.T, d time.Duration, pprofAddr string) func() (apiserver, operator *profile.Profile) {
	t.Helper()
	secs := strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
	type result struct {
		p   *profile.Profile
		err error
	}
	fetch := func(c *http.Client, url string) chan result {
		ch := make(chan result, 1)
		go func() {
			data, err := httpGet(c, url)
			if err != nil {
				ch <- result{err: err}
				return
			}
			p, err := profile.ParseData(data)
			ch <- result{p, err}
		}()
		return ch
	}
	api := fetch(se.http, strings.TrimSuffix(se.cfg.Host, "/")+"/debug/pprof/profile?seconds="+secs)
	var op chan result
	if se.operator != nil && pprofAddr != "" {
		op = fetch(http.DefaultClient, "http://"+pprofAddr+"/debug/pprof/profile?seconds="+secs)
	}
	return func() (*profile.Profile, *profile.Profile) {
		a := <-api
		if a.err != nil {
			t.Fatalf("profile the apiserver: %v", a.err)
		}
		if op == nil {
			return a.p, nil
		}
		o := <-op
		if o.err != nil {
			t.Fatalf("profile the operator: %v", o.err)
		}
		return a.p, o.p
	}
}

// freeLoopbackAddr is a free TCP address on 127.0.0.1.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// profileArea is a share of a process's CPU: the samples with a frame of one of its function
// name prefixes, in the first area (in order) that claims them.
type profileArea struct {
	name     string
	prefixes []string
}

// apiserverAreas divide the apiserver's CPU.
var apiserverAreas = []profileArea{
	// Every ClusterIP allocation counts the allocated addresses (twice, for its metrics): a
	// list of every IPAddress, so a Service's create costs O(Services) in Kubernetes 1.37.
	{"allocating ClusterIPs (the IPAddress allocator)", []string{"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"}},
	{"calling admission webhooks (TLS, AdmissionReview encoding, waiting)", []string{"k8s.io/apiserver/pkg/admission/plugin/webhook"}},
	{"answering SubjectAccessReviews", []string{"k8s.io/kubernetes/pkg/registry/authorization"}},
	{"watch fan-out (watch cache, encoding events to watchers)", []string{"k8s.io/apiserver/pkg/storage/cacher", "k8s.io/apiserver/pkg/endpoints/handlers.serveWatch", "k8s.io/apiserver/pkg/endpoints/handlers.(*WatchServer)", "k8s.io/apiserver/pkg/endpoints/handlers/watch"}},
	{"managed fields", []string{"k8s.io/apimachinery/pkg/util/managedfields", "sigs.k8s.io/structured-merge-diff", "k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager"}},
	{"storage (etcd client, transformers)", []string{"k8s.io/apiserver/pkg/storage/etcd3", "go.etcd.io/etcd/client", "k8s.io/apiserver/pkg/storage/value"}},
	{"CRD schema, defaulting and CEL", []string{"k8s.io/apiextensions-apiserver/pkg/apiserver/schema", "k8s.io/apiextensions-apiserver/pkg/apiserver/validation", "k8s.io/apiserver/pkg/cel", "github.com/google/cel-go"}},
	{"decoding requests and encoding responses", []string{"k8s.io/apimachinery/pkg/runtime/serializer", "k8s.io/apiserver/pkg/endpoints/handlers/responsewriters", "encoding/json", "sigs.k8s.io/json"}},
	{"TLS", []string{"crypto/"}},
	{"garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.gcDrain", "runtime.bgsweep", "runtime.bgscavenge"}},
}

// operatorAreas divide the operator's CPU.
var operatorAreas = []profileArea{
	{"admission webhooks (serving, SubjectAccessReviews)", []string{"sigs.k8s.io/controller-runtime/pkg/webhook", "github.com/ndsl-cn/pipeline-operator/internal/admission", "github.com/ndsl-cn/pipeline-operator/internal/webhookserver"}},
	{"events", []string{"k8s.io/client-go/tools/events", "k8s.io/client-go/tools/record"}},
	{"reconciler: status", []string{"github.com/ndsl-cn/pipeline-operator/internal/status"}},
	{"reconciler: comparing with the cache (apply)", []string{"github.com/ndsl-cn/pipeline-operator/internal/apply"}},
	{"reconciler: building children", []string{"github.com/ndsl-cn/pipeline-operator/internal/resources"}},
	{"reconciler: requests and the rest", []string{"github.com/ndsl-cn/pipeline-operator/internal/controller", "sigs.k8s.io/controller-runtime/pkg/internal/controller"}},
	{"informers (decoding watch events, cache, indexes)", []string{"k8s.io/client-go/tools/cache", "k8s.io/client-go/rest/watch", "k8s.io/apimachinery/pkg/watch", "sigs.k8s.io/controller-runtime/pkg/cache", "k8s.io/client-go/tools/watch"}},
	{"TLS", []string{"crypto/"}},
	{"garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.gcDrain", "runtime.bgsweep", "runtime.bgscavenge"}},
}

// areaShares divides the CPU of p among areas ("other" for what none claims), in seconds.
func areaShares(p *profile.Profile, areas []profileArea) (map[string]float64, float64) {
	shares := map[string]float64{}
	total := 0.0
	idx := valueIndex(p, "cpu")
	if idx < 0 {
		return shares, 0
	}
	for _, s := range p.Sample {
		v := float64(s.Value[idx]) / 1e9
		total += v
		area := "other"
	find:
		for _, a := range areas {
			for _, loc := range s.Location {
				for _, line := range loc.Line {
					if line.Function == nil {
						continue
					}
					for _, prefix := range a.prefixes {
						if strings.HasPrefix(line.Function.Name, prefix) {
							area = a.name
							break find
						}
					}
				}
			}
		}
		shares[area] += v
	}
	return shares, total
}

// valueIndex is the index of the sample values of type typ in p, -1 when it has none.
func valueIndex(p *profile.Profile, typ string) int {
	return slices.IndexFunc(p.SampleType, func(st *profile.ValueType) bool { return st.Type == typ })
}

// medianDuration of ds; ds must not be empty.
func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// The benchmark's readers of metrics and profiles, on fixed input.
func TestBenchReaders(t *testing.T) {
	name, labels, value, ok := metricLine(`apiserver_request_total{code="201",resource="pipelines",subresource="",verb="POST"} 1200`)
	if !ok || name != "apiserver_request_total" || labels["resource"] != "pipelines" || labels["verb"] != "POST" || value != 1200 {
		t.Errorf("metricLine: %q %v %v %v", name, labels, value, ok)
	}
	if _, _, _, ok := metricLine("# TYPE apiserver_request_total counter"); ok {
		t.Error("metricLine read a comment")
	}
	counts := requestCounts{"pipelines POST": 1200, "pipelines PATCH": 3, "pipelines/status PATCH": 1000,
		"deployments POST": 3000, "events POST": 1000, "subjectaccessreviews POST": 1000, "pipelines GET": 99}
	if w, e := counts.sub(requestCounts{"pipelines POST": 200}).operatorWrites(1000); w != 4003 || e != 1000 {
		t.Errorf("operatorWrites: %d writes, %d events", w, e)
	}
	if m := medianDuration([]time.Duration{3, 1, 2, 10}); m != 2 {
		t.Errorf("median of 1, 2, 3, 10: %d", m)
	}
	fn := func(name string) *profile.Location {
		return &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: name}}}}
	}
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples"}, {Type: "cpu"}}, Sample: []*profile.Sample{
		{Value: []int64{1, 2e9}, Location: []*profile.Location{fn("crypto/tls.(*Conn).Write"), fn("k8s.io/apiserver/pkg/admission/plugin/webhook/generic.(*Webhook).Dispatch")}},
		{Value: []int64{1, 1e9}, Location: []*profile.Location{fn("crypto/tls.(*Conn).Write"), fn("net/http.(*conn).serve")}},
		{Value: []int64{1, 5e8}, Location: []*profile.Location{fn("net/http.(*conn).serve")}},
		{Value: []int64{1, 4e9}, Location: []*profile.Location{fn("k8s.io/client-go/tools/cache.ListAll"), fn("k8s.io/kubernetes/pkg/registry/core/service/ipallocator.(*Allocator).Used")}},
	}}
	shares, total := areaShares(p, apiserverAreas)
	if total != 7.5 || shares[apiserverAreas[0].name] != 4 || shares[apiserverAreas[1].name] != 2 || shares["TLS"] != 1 || shares["other"] != 0.5 {
		t.Errorf("areaShares: %v of %v", shares, total)
	}
}
