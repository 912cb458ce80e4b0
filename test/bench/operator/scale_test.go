package operator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/pprof/profile"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// TestBenchScale measures the operator with 10,000 Pipelines (BENCH_SCALE_N) against the floor,
// each side after a warm-up round of 1,000 (BENCH_SCALE_WARMUP), one run each, and what a
// manager that starts against them costs: the time until its cache and its queue have caught
// up, its writes on that start and on a resync, and its heap per cached object. It writes
// $BENCH_SCALE_OUTPUT (make bench-scale: docs/performance-scale.md); no assertion is timed.
//
// At 10,000 a side takes 30 to 100 minutes on 2 cores, depending on the machine.
// BENCH_SCALE_SIDE=floor or operator measures that side alone: each side's figures are kept in
// the JSON file beside the output, and the report is written from the figures kept of both.
func TestBenchScale(t *testing.T) {
	out := os.Getenv("BENCH_SCALE_OUTPUT")
	if out == "" || os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("BENCH_SCALE_OUTPUT and KUBEBUILDER_ASSETS are not set: run `make bench-scale`")
	}
	n := benchInts(t, "BENCH_SCALE_N", []int{10000})[0]
	warm := benchInts(t, "BENCH_SCALE_WARMUP", []int{1000})[0]
	side := os.Getenv("BENCH_SCALE_SIDE")
	if side != "" && side != "floor" && side != "operator" {
		t.Fatalf("BENCH_SCALE_SIDE=%q: want floor, operator, or nothing for both", side)
	}
	ctrl.SetLogger(logr.Discard())
	data := strings.TrimSuffix(out, ".md") + ".json"
	rep := readScaleReport(t, data, n, warm)
	if side != "operator" {
		rep.Floor = measureFloor(t, n, warm)
	}
	if side != "floor" {
		rep.Operator = measureOperator(t, n, warm)
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	// The node events (TestBenchNodeEvents, run before at the same size) and the reading stay.
	if err := os.WriteFile(out, []byte(keepSections(out, rep.markdown())), 0o644); err != nil {
		t.Fatal(err)
	}
}

// measureFloor is the floor's side: its round of n Pipelines after a warm-up round of warm.
func measureFloor(t *testing.T, n, warm int) *scaleSide {
	t.Helper()
	r := newScaleSide(n, warm)
	floor := startSide(t, benchSide{})
	defer floor.stop()
	floor.round(t, "warmup", warm)
	cpu0 := floor.cpu(t)
	r.Converged = floor.round(t, "bench", n)
	r.setCPU(floor.cpu(t).sub(cpu0))
	t.Logf("floor: %s", r.Converged.Round(time.Millisecond))
	return r
}

// measureOperator is the operator's side: its round of n Pipelines after a warm-up round of
// warm, then a new manager against them all, as in a rollout, and the informers' resync.
func measureOperator(t *testing.T, n, warm int) *scaleSide {
	t.Helper()
	r := newScaleSide(n, warm)
	op := buildVariant(t, "operator", testenv.RepoPath(), t.TempDir())
	metricsAddr := freeLoopbackAddr(t)
	pprofAddr := freeLoopbackAddr(t)
	flags := []string{concurrencyFlag(defaultConcurrency), "--metrics-bind-address=" + metricsAddr, "--metrics-secure=false",
		"--pprof-bind-address=" + pprofAddr}
	se := startSide(t, benchSide{variant: op}, flags...)
	defer se.stop()
	se.round(t, "warmup", warm)
	cpu0 := se.cpu(t)
	w0 := se.requests(t)
	r.Converged = se.round(t, "bench", n)
	r.setCPU(se.cpu(t).sub(cpu0))
	se.settle(t)
	r.Writes, r.Events = se.requests(t).sub(w0).operatorWrites(n)
	t.Logf("operator: %s, %.2f writes and %.2f events per Pipeline", r.Converged.Round(time.Millisecond),
		float64(r.Writes)/float64(n), float64(r.Events)/float64(n))

	// A new manager against every Pipeline: the old one stops as in a rollout.
	se.operator.stop()
	total := n + warm
	w0 = se.requests(t)
	resync := 3 * time.Minute
	started := time.Now()
	se.operator = startOperatorProcess(t, se.env, se.cfg, op, append(flags, "--sync-period="+resync.String())...)
	r.CacheSynced = se.operator.waitLog(t, 10*time.Minute, "Starting workers", `"controller":"pipeline"`).Sub(started)
	r.CaughtUp = waitReconciled(t, se.operator, metricsAddr, total, 20*time.Minute).Sub(started)
	se.settle(t)
	r.HeapPerObject = heapInUse(t, pprofAddr) / int64(total*cachedPerPipeline)
	after := se.requests(t)
	r.RestartWrites, r.RestartEvents = after.sub(w0).operatorWrites(0)
	t.Logf("restart: cache %s, caught up %s, %d writes, %d events, heap/object %d B", r.CacheSynced.Round(time.Millisecond),
		r.CaughtUp.Round(time.Millisecond), r.RestartWrites, r.RestartEvents, r.HeapPerObject)

	// The informers' resync hands every Pipeline to the controller again.
	waitReconciled(t, se.operator, metricsAddr, 2*total, resync+20*time.Minute)
	se.settle(t)
	r.ResyncWrites, r.ResyncEvents = se.requests(t).sub(after).operatorWrites(0)
	t.Logf("resync: %d writes, %d events", r.ResyncWrites, r.ResyncEvents)
	return r
}

// requestCounts are the apiserver's requests by "resource[/subresource] VERB".
type requestCounts map[string]float64

// requests reads the apiserver's apiserver_request_total.
func (se *sideEnv) requests(t *testing.T) requestCounts {
	t.Helper()
	rc := requestCounts{}
	forEachSample(se.get(t, "/metrics"), func(name string, labels map[string]string, value float64) {
		if name != "apiserver_request_total" {
			return
		}
		key := labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		rc[key+" "+labels["verb"]] += value
	})
	return rc
}

func (a requestCounts) sub(b requestCounts) requestCounts {
	d := requestCounts{}
	for k, v := range a {
		d[k] = v - b[k]
	}
	return d
}

// operatorKinds are the resources the operator writes for the benchmark's Pipelines.
var operatorKinds = []string{"pipelines", "pipelines/status", "deployments", "services", "persistentvolumeclaims",
	"persistentvolumes", "networkpolicies"}

// operatorWrites counts the writes (every create, update, patch and delete, refused or not) of
// the operator's kinds, less the creates of created Pipelines (the writers'), and the writes of
// events apart.
func (a requestCounts) operatorWrites(created int) (writes, events int64) {
	for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"} {
		for _, kind := range operatorKinds {
			writes += int64(a[kind+" "+verb])
		}
		events += int64(a["events "+verb])
	}
	return writes - int64(created), events
}

// settle waits until the apiserver has served no write for 2 s.
func (se *sideEnv) settle(t *testing.T) {
	t.Helper()
	writes := func() float64 {
		sum := 0.0
		for k, v := range se.requests(t) {
			if !strings.HasSuffix(k, " GET") && !strings.HasSuffix(k, " LIST") && !strings.HasSuffix(k, " WATCH") &&
				!strings.HasPrefix(k, "leases") {
				sum += v
			}
		}
		return sum
	}
	last := writes()
	for {
		time.Sleep(2 * time.Second)
		now := writes()
		if now == last {
			return
		}
		last = now
	}
}

// waitLog waits until the process's log has a line containing every one of texts, and returns
// when it saw it.
func (p *benchProcess) waitLog(t *testing.T, timeout time.Duration, texts ...string) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		data, _ := os.ReadFile(p.log)
		for _, line := range bytes.Split(data, []byte("\n")) {
			if !slices.ContainsFunc(texts, func(s string) bool { return !bytes.Contains(line, []byte(s)) }) {
				return time.Now()
			}
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("the manager did not log a line with %q:\n%s", texts, p.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitReconciled waits until the operator's Pipeline controller has finished at least passes
// passes and its queue is empty, and returns when.
func waitReconciled(t *testing.T, p *benchProcess, metricsAddr string, passes int, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, depth := controllerProgress(t, metricsAddr)
		if done >= float64(passes) && depth == 0 {
			return time.Now()
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("%.0f of %d passes, %.0f queued:\n%s", done, passes, depth, p.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// controllerProgress reads the passes the Pipeline controller finished and its queue's depth
// from the operator's metrics.
func controllerProgress(t *testing.T, metricsAddr string) (passes, depth float64) {
	t.Helper()
	body, err := httpGet(http.DefaultClient, "http://"+metricsAddr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	forEachSample(body, func(name string, labels map[string]string, value float64) {
		switch {
		case name == "controller_runtime_reconcile_total" && labels["controller"] == "pipeline":
			passes += value
		case name == "workqueue_depth" && labels["name"] == "pipeline":
			depth += value
		}
	})
	return passes, depth
}

// heapInUse is the operator's live heap after a garbage collection, from its heap profile.
func heapInUse(t *testing.T, pprofAddr string) int64 {
	t.Helper()
	data, err := httpGet(http.DefaultClient, "http://"+pprofAddr+"/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := profile.ParseData(data)
	if err != nil {
		t.Fatal(err)
	}
	idx := valueIndex(p, "inuse_space")
	if idx < 0 {
		t.Fatal("the heap profile has no inuse_space")
	}
	var sum int64
	for _, s := range p.Sample {
		sum += s.Value[idx]
	}
	return sum
}

// cachedPerPipeline is the objects the operator caches per Pipeline of benchSteps steps: the
// Pipeline, its PersistentVolume and claim, a Deployment and a Service per step, and its
// NetworkPolicy.
const cachedPerPipeline = 1 + 2 + 2*benchSteps + 1

// scaleReport is what make bench-scale keeps of each side, in the JSON file beside its report.
type scaleReport struct {
	Floor    *scaleSide `json:"floor,omitempty"`
	Operator *scaleSide `json:"operator,omitempty"`
}

// scaleSide is what one side measured. Durations are in nanoseconds; the operator's figures of
// writes, its restart and its heap are zero for the floor.
type scaleSide struct {
	Started   time.Time     `json:"started"`
	Machine   string        `json:"machine"`
	Pipelines int           `json:"pipelines"`
	Warmup    int           `json:"warmup"`
	Converged time.Duration `json:"converged"`

	APIServerCPU time.Duration `json:"apiserverCPU"`
	EtcdCPU      time.Duration `json:"etcdCPU"`
	OperatorCPU  time.Duration `json:"operatorCPU,omitempty"`
	WritersCPU   time.Duration `json:"writersCPU"`

	Writes        int64         `json:"writes,omitempty"`
	Events        int64         `json:"events,omitempty"`
	CacheSynced   time.Duration `json:"cacheSynced,omitempty"`
	CaughtUp      time.Duration `json:"caughtUp,omitempty"`
	RestartWrites int64         `json:"restartWrites,omitempty"`
	RestartEvents int64         `json:"restartEvents,omitempty"`
	ResyncWrites  int64         `json:"resyncWrites,omitempty"`
	ResyncEvents  int64         `json:"resyncEvents,omitempty"`
	HeapPerObject int64         `json:"heapPerObject,omitempty"`
}

func newScaleSide(n, warm int) *scaleSide {
	host, _ := os.Hostname()
	return &scaleSide{
		Started:   time.Now().UTC(),
		Machine:   fmt.Sprintf("%s (%s/%s, %d CPUs, %s)", host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()),
		Pipelines: n,
		Warmup:    warm,
	}
}

func (s *scaleSide) setCPU(c cpuTimes) {
	s.APIServerCPU, s.EtcdCPU, s.OperatorCPU, s.WritersCPU = c.apiserver, c.etcd, c.operator, c.bench
}

// readScaleReport reads the figures kept in path of the sides measured at n Pipelines after a
// warm-up of warm; those of other sizes are dropped.
func readScaleReport(t *testing.T, path string, n, warm int) scaleReport {
	t.Helper()
	var r scaleReport
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return r
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	same := func(s *scaleSide) *scaleSide {
		if s == nil || s.Pipelines != n || s.Warmup != warm {
			return nil
		}
		return s
	}
	return scaleReport{Floor: same(r.Floor), Operator: same(r.Operator)}
}

// figure is f of s, or – when s was not measured.
func figure(s *scaleSide, f func(*scaleSide) string) string {
	if s == nil {
		return "–"
	}
	return f(s)
}

// perPipeline is d per Pipeline of s, or – when s was not measured.
func perPipeline(s *scaleSide, d func(*scaleSide) time.Duration) string {
	return figure(s, func(s *scaleSide) string { return ms(d(s) / time.Duration(s.Pipelines)) })
}

func (r scaleReport) markdown() string {
	var b strings.Builder
	when := func(s *scaleSide) string {
		if s == nil {
			return "not measured at this size"
		}
		return s.Started.Format("2006-01-02 15:04 UTC") + " on " + s.Machine
	}
	fmt.Fprintf(&b, "# Performance at scale\n\nMeasured by `make bench-scale`: the floor %s; the operator %s.\n\n",
		when(r.Floor), when(r.Operator))
	some := r.Operator
	if some == nil {
		some = r.Floor
	}
	n, warm := some.Pipelines, some.Warmup
	converged := func(s *scaleSide) string { return fmt.Sprintf("%.1f s", s.Converged.Seconds()) }
	ratio := "–"
	if r.Floor != nil && r.Operator != nil {
		ratio = fmt.Sprintf("%.2f", r.Operator.Converged.Seconds()/r.Floor.Converged.Seconds())
	}
	fmt.Fprintf(&b, `The method of [performance.md](performance.md#method) with %d Pipelines of 3 steps (%d children,
%d objects the operator caches) created by 16 writers, after a warm-up round of %d; one run of
each side, the floor first when both run together. The operator runs as its binary with its
webhooks served.

| | floor | operator | ratio (goal ≤ 1.3) |
|---|---|---|---|
| converged | %s | %s | %s |
| CPU per Pipeline, kube-apiserver | %s | %s | |
| CPU per Pipeline, etcd | %s | %s | |
| CPU per Pipeline, operator | – | %s | |
| CPU per Pipeline, writers | %s | %s | |
`, n, n*(cachedPerPipeline-1), n*cachedPerPipeline, warm, figure(r.Floor, converged), figure(r.Operator, converged), ratio,
		perPipeline(r.Floor, func(s *scaleSide) time.Duration { return s.APIServerCPU }),
		perPipeline(r.Operator, func(s *scaleSide) time.Duration { return s.APIServerCPU }),
		perPipeline(r.Floor, func(s *scaleSide) time.Duration { return s.EtcdCPU }),
		perPipeline(r.Operator, func(s *scaleSide) time.Duration { return s.EtcdCPU }),
		perPipeline(r.Operator, func(s *scaleSide) time.Duration { return s.OperatorCPU }),
		perPipeline(r.Floor, func(s *scaleSide) time.Duration { return s.WritersCPU }),
		perPipeline(r.Operator, func(s *scaleSide) time.Duration { return s.WritersCPU }))
	if o := r.Operator; o != nil {
		total := o.Pipelines + o.Warmup
		fmt.Fprintf(&b, `
Counted by the apiserver (apiserver_request_total: every create, update, patch and delete of
the kinds the operator writes, refused or not, less the writers' creates of Pipelines):

| | figure | goal |
|---|---|---|
| writes per Pipeline while the %d converge | %.2f | 10 |
| events per Pipeline | %.2f | |
| a new manager against all %d: time to a synced cache (its "Starting workers") | %.1f s | published |
| ... and to every Pipeline reconciled with an empty queue | %.1f s | published |
| ... writes, events on that start | %d, %d | 0 |
| ... writes, events on the informers' resync that follows | %d, %d | 0 |
| heap in use per cached object (Go heap profile after a GC, over %d objects) | %d B | ≤ 4096 B |

The heap figure divides the whole live heap of the manager by the objects it caches, fixed
share included.
`, o.Pipelines, float64(o.Writes)/float64(o.Pipelines), float64(o.Events)/float64(o.Pipelines), total,
			o.CacheSynced.Seconds(), o.CaughtUp.Seconds(), o.RestartWrites, o.RestartEvents, o.ResyncWrites, o.ResyncEvents,
			total*cachedPerPipeline, o.HeapPerObject)
	}
	fmt.Fprintf(&b, `
Reproduce with `+"`make bench-scale`"+` (`+"`BENCH_SCALE_N`"+`, `+"`BENCH_SCALE_WARMUP`"+` to change the sizes). At
10,000 Pipelines a side takes 30 to 100 minutes on 2 cores, depending on the machine: `+"`BENCH_SCALE_SIDE=floor`"+` or `+"`operator`"+`
measures one side, and the report is written from the figures of both kept in
[performance-scale.json](performance-scale.json).
`)
	return b.String()
}

// TestScaleReportKeepsSidesOfTheSameSize checks that the figures kept of a side measured at
// another size are dropped, and that the report shows a side not measured as such.
func TestScaleReportKeepsSidesOfTheSameSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scale.json")
	if r := readScaleReport(t, path, 10000, 1000); r.Floor != nil || r.Operator != nil {
		t.Fatalf("no file read as %+v", r)
	}
	kept := scaleReport{
		Floor:    &scaleSide{Pipelines: 10000, Warmup: 1000, Converged: 4749 * time.Second, APIServerCPU: 1000 * time.Second},
		Operator: &scaleSide{Pipelines: 2000, Warmup: 200, Converged: 249 * time.Second},
	}
	js, err := json.Marshal(kept)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
	r := readScaleReport(t, path, 10000, 1000)
	if r.Floor == nil || r.Floor.Converged != 4749*time.Second || r.Operator != nil {
		t.Fatalf("read %+v, want the floor at 10000 and no operator", r)
	}
	md := r.markdown()
	for _, want := range []string{"the operator not measured at this size", "| converged | 4749.0 s | – | – |",
		"| CPU per Pipeline, kube-apiserver | 100.0 ms | – | |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report has no %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "writes per Pipeline") {
		t.Errorf("the report has the operator's figures without an operator:\n%s", md)
	}

	r.Operator = &scaleSide{Pipelines: 10000, Warmup: 1000, Converged: 5698800 * time.Millisecond, Writes: 100000}
	md = r.markdown()
	for _, want := range []string{"| converged | 4749.0 s | 5698.8 s | 1.20 |", "| writes per Pipeline while the 10000 converge | 10.00 | 10 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report has no %q:\n%s", want, md)
		}
	}
}
