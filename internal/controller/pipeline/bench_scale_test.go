package pipeline

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
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
func TestBenchScale(t *testing.T) {
	out := os.Getenv("BENCH_SCALE_OUTPUT")
	if out == "" || os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("BENCH_SCALE_OUTPUT and KUBEBUILDER_ASSETS are not set: run `make bench-scale`")
	}
	n := benchInts(t, "BENCH_SCALE_N", []int{10000})[0]
	warm := benchInts(t, "BENCH_SCALE_WARMUP", []int{1000})[0]
	ctrl.SetLogger(logr.Discard())
	rep := scaleReport{started: time.Now(), n: n, warm: warm}
	op := buildVariant(t, "operator", testenv.RepoPath(), t.TempDir())

	floor := startSide(t, benchSide{})
	floor.round(t, "warmup", warm)
	cpu0 := floor.cpu(t)
	rep.floor = floor.round(t, "bench", n)
	rep.floorCPU = floor.cpu(t).sub(cpu0)
	floor.stop()
	t.Logf("floor: %s", rep.floor.Round(time.Millisecond))

	metricsAddr := freeLoopbackAddr(t)
	pprofAddr := freeLoopbackAddr(t)
	flags := []string{concurrencyFlag(defaultConcurrency), "--metrics-bind-address=" + metricsAddr, "--metrics-secure=false",
		"--pprof-bind-address=" + pprofAddr}
	se := startSide(t, benchSide{variant: op}, flags...)
	defer se.stop()
	se.round(t, "warmup", warm)
	cpu0 = se.cpu(t)
	w0 := se.requests(t)
	rep.operator = se.round(t, "bench", n)
	rep.operatorCPU = se.cpu(t).sub(cpu0)
	se.settle(t)
	rep.writes, rep.events = se.requests(t).sub(w0).operatorWrites(n)
	t.Logf("operator: %s, %.2f writes and %.2f events per Pipeline", rep.operator.Round(time.Millisecond),
		float64(rep.writes)/float64(n), float64(rep.events)/float64(n))

	// A new manager against every Pipeline: the old one stops as in a rollout.
	se.operator.stop()
	total := n + warm
	w0 = se.requests(t)
	resync := 3 * time.Minute
	started := time.Now()
	se.operator = startOperatorProcess(t, se.env, se.cfg, op, append(flags, "--sync-period="+resync.String())...)
	rep.cacheSynced = se.operator.waitLog(t, 10*time.Minute, "Starting workers", `"controller":"pipeline"`).Sub(started)
	rep.caughtUp = waitReconciled(t, se.operator, metricsAddr, total, 20*time.Minute).Sub(started)
	se.settle(t)
	rep.heapPerObject = heapInUse(t, pprofAddr) / int64(total*(1+2+2*benchSteps+1))
	after := se.requests(t)
	rep.restartWrites, rep.restartEvents = after.sub(w0).operatorWrites(0)
	t.Logf("restart: cache %s, caught up %s, %d writes, %d events, heap/object %d B", rep.cacheSynced.Round(time.Millisecond),
		rep.caughtUp.Round(time.Millisecond), rep.restartWrites, rep.restartEvents, rep.heapPerObject)

	// The informers' resync hands every Pipeline to the controller again.
	waitReconciled(t, se.operator, metricsAddr, 2*total, resync+20*time.Minute)
	se.settle(t)
	rep.resyncWrites, rep.resyncEvents = se.requests(t).sub(after).operatorWrites(0)
	t.Logf("resync: %d writes, %d events", rep.resyncWrites, rep.resyncEvents)

	// The node events (TestBenchNodeEvents, run before at the same size) and the reading stay.
	if err := os.WriteFile(out, []byte(keepSections(out, rep.markdown())), 0o644); err != nil {
		t.Fatal(err)
	}
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

type scaleReport struct {
	started                      time.Time
	n, warm                      int
	floor, operator              time.Duration
	floorCPU, operatorCPU        cpuTimes
	writes, events               int64
	cacheSynced, caughtUp        time.Duration
	restartWrites, restartEvents int64
	resyncWrites, resyncEvents   int64
	heapPerObject                int64
}

func (r scaleReport) markdown() string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# Performance at scale\n\nMeasured by `make bench-scale` on %s (%s/%s, %d CPUs, %s), %s.\n\n",
		host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), r.started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, `The method of [performance.md](performance.md#method) with %d Pipelines of 3 steps (%d children,
%d objects the operator caches) created by 16 writers, after a warm-up round of %d; one run of
each side, the floor first. The operator runs as its binary with its webhooks served.

| | floor | operator | ratio (goal ≤ 1.3) |
|---|---|---|---|
| converged | %.1f s | %.1f s | %.2f |
| CPU per Pipeline, kube-apiserver | %s | %s | |
| CPU per Pipeline, etcd | %s | %s | |
| CPU per Pipeline, operator | – | %s | |
| CPU per Pipeline, writers | %s | %s | |
`, r.n, r.n*(2+2*benchSteps+1), r.n*(1+2+2*benchSteps+1), r.warm,
		r.floor.Seconds(), r.operator.Seconds(), r.operator.Seconds()/r.floor.Seconds(),
		ms(r.floorCPU.apiserver/time.Duration(r.n)), ms(r.operatorCPU.apiserver/time.Duration(r.n)),
		ms(r.floorCPU.etcd/time.Duration(r.n)), ms(r.operatorCPU.etcd/time.Duration(r.n)),
		ms(r.operatorCPU.operator/time.Duration(r.n)),
		ms(r.floorCPU.bench/time.Duration(r.n)), ms(r.operatorCPU.bench/time.Duration(r.n)))
	total := r.n + r.warm
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

Reproduce with `+"`make bench-scale`"+` (`+"`BENCH_SCALE_N`"+`, `+"`BENCH_SCALE_WARMUP`"+` to change the sizes).
`, r.n, float64(r.writes)/float64(r.n), float64(r.events)/float64(r.n), total, r.cacheSynced.Seconds(), r.caughtUp.Seconds(),
		r.restartWrites, r.restartEvents, r.resyncWrites, r.resyncEvents, total*(1+2+2*benchSteps+1), r.heapPerObject)
	return b.String()
}
