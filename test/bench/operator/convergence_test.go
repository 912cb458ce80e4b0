// Package operator holds the operator's benchmarks, which `make bench` and `make bench-scale`
// run: N Pipelines converged by the manager binary, run out of process with its webhooks served,
// against the raw-write floor (convergence_test.go; cluster_test.go starts each side's control
// plane and reads the figures of its processes from /proc and their profiles), the cost of a
// node event in the operator's process (nodeevents_test.go), and the operator with 10,000
// Pipelines (scale_test.go). They write docs/performance.md and docs/performance-scale.md, and
// reach the reconciler through its exported API alone (internal/controller/pipeline's
// benchmarks.go names what only they use).
package operator

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/controller/pipeline"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// TestBench measures the operator against the fastest the apiserver allows on the same
// machine, and writes the figures to $BENCH_OUTPUT (make bench: docs/performance.md). Every
// figure is a ratio against a baseline of the same run, or a count; no assertion is timed.
//
// BENCH_SIZES (200,1000) are the numbers of Pipelines, BENCH_RUNS (3) the runs of each side
// whose medians are compared, BENCH_BEFORE a revision of this repository measured beside the
// work tree, BENCH_PROFILE=off skips the profiles, BENCH_SWEEP=off the concurrency sweep.
func TestBench(t *testing.T) {
	out := os.Getenv("BENCH_OUTPUT")
	if out == "" || os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("BENCH_OUTPUT and KUBEBUILDER_ASSETS are not set: run `make bench`")
	}
	sizes := benchInts(t, "BENCH_SIZES", []int{200, 1000})
	runs := benchInts(t, "BENCH_RUNS", []int{3})[0]
	ctrl.SetLogger(logr.Discard())
	report := &benchReport{started: time.Now(), runs: runs}

	bins := t.TempDir()
	sides := []benchSide{{}, {variant: buildVariant(t, "operator", testenv.RepoPath(), bins)}}
	if rev := os.Getenv("BENCH_BEFORE"); rev != "" {
		report.before = rev
		sides = append(sides, benchSide{variant: buildVariant(t, "operator at "+rev, checkout(t, rev), bins)})
	}
	for _, s := range sides {
		report.sides = append(report.sides, s.name())
	}

	for _, n := range sizes {
		row := convergeRow{n: n, runs: map[string][]sideRun{}}
		for r := range runs {
			// Sides alternate: each goes first in some runs and last in others.
			order := slices.Clone(sides)
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, s := range order {
				run := benchRound(t, s, n, defaultConcurrency)
				row.runs[s.name()] = append(row.runs[s.name()], run)
				t.Logf("N=%d run %d %s: %s", n, r+1, s.name(), run.converge.Round(time.Millisecond))
			}
		}
		acc := benchAccounting(t, n, defaultConcurrency)
		row.accounting = acc
		report.rows = append(report.rows, row)
		t.Logf("N=%d ratio %.2f writes/pipeline %.2f events/pipeline %.2f restart writes %d resync writes %d heap/object %d B",
			n, row.ratio("operator"), float64(acc.writes)/float64(n), float64(acc.events)/float64(n),
			acc.restartWrites, acc.resyncWrites, acc.heapPerObject)
	}

	if os.Getenv("BENCH_PROFILE") != "off" {
		report.profiles = benchProfiles(t, sizes[0], report.rows[0], sides[1].variant)
	}
	if os.Getenv("BENCH_SWEEP") != "off" {
		for _, c := range []int{1, 2, 4, 8, 16} {
			run := benchRound(t, sides[1], sizes[0], c)
			report.sweep = append(report.sweep, sweepRow{concurrency: c, n: sizes[0], converge: run.converge})
			t.Logf("MaxConcurrentReconciles=%d N=%d converge %s", c, sizes[0], run.converge.Round(time.Millisecond))
		}
	}
	report.foreignGrowth = benchForeign(t)

	// The node events and the reading stay (keptSections).
	if err := os.WriteFile(out, []byte(keepSections(out, report.markdown())), 0o644); err != nil {
		t.Fatal(err)
	}
}

func concurrencyFlag(n int) string { return "--max-concurrent-reconciles=" + strconv.Itoa(n) }

// benchInts reads a comma-separated list of positive integers from the environment.
func benchInts(t *testing.T, name string, def []int) []int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want positive integers separated by commas", name, v)
		}
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// sideRun is one timed round of one side.
type sideRun struct {
	converge time.Duration
	cpu      cpuTimes
	webhooks webhookStats
}

// benchRound starts a fresh control plane for s, runs a warm-up round of n Pipelines (the
// same work, untimed, so that the timed round finds a store as full, and an operator as warm,
// on every side), then the timed round of n more, and stops the control plane.
func benchRound(t *testing.T, s benchSide, n, concurrency int) sideRun {
	t.Helper()
	se := startSide(t, s, concurrencyFlag(concurrency))
	defer se.stop()
	se.round(t, "warmup", n)
	cpu0 := se.cpu(t)
	var wh0 webhookStats
	if s.variant != nil {
		wh0 = se.webhooks(t)
	}
	run := sideRun{converge: se.round(t, "bench", n)}
	run.cpu = se.cpu(t).sub(cpu0)
	if s.variant != nil {
		run.webhooks = se.webhooks(t).sub(wh0)
	}
	return run
}

// sideProfile is where one side's CPU went in a profiled round.
type sideProfile struct {
	side                      string
	apiserver, operator       map[string]float64
	apiserverCPU, operatorCPU float64
}

// benchProfiles runs the floor and the operator once more at n, profiling the apiserver and
// the operator for as long as the side's median round took.
func benchProfiles(t *testing.T, n int, row convergeRow, operator *benchVariant) []sideProfile {
	t.Helper()
	var out []sideProfile
	for _, s := range []benchSide{{}, {variant: operator}} {
		name, addr := s.name(), ""
		args := []string{concurrencyFlag(defaultConcurrency)}
		if s.variant != nil {
			addr = freeLoopbackAddr(t)
			args = append(args, "--pprof-bind-address="+addr)
		}
		se := startSide(t, s, args...)
		se.round(t, "warmup", n)
		wait := se.profileFor(t, row.median(name), addr)
		se.round(t, "bench", n)
		api, op := wait()
		se.stop()
		sp := sideProfile{side: name}
		sp.apiserver, sp.apiserverCPU = areaShares(api, apiserverAreas)
		if op != nil {
			sp.operator, sp.operatorCPU = areaShares(op, operatorAreas)
		}
		out = append(out, sp)
	}
	return out
}

// defaultConcurrency is the manager's --max-concurrent-reconciles default, chosen by the sweep.
const defaultConcurrency = 4

const (
	benchWriters = 16
	benchSteps   = 3
)

// startBenchEnv starts the floor's control plane (startSide) with namespace ns too, and returns
// its config, a client and what stops it (also when the test ends; stopping twice is harmless).
func startBenchEnv(t *testing.T, ns string) (*rest.Config, client.Client, func()) {
	t.Helper()
	se := startSide(t, benchSide{})
	t.Cleanup(se.stop)
	if err := client.IgnoreAlreadyExists(se.c.Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
		t.Fatal(err)
	}
	return se.cfg, se.c, se.stop
}

func runtimeScheme() *apiruntime.Scheme { return testenv.Scheme() }

func benchScheme() client.Options { return client.Options{Scheme: runtimeScheme()} }

// benchPipeline is the i-th Pipeline of a run, in v1: the sample with three steps on unpinned
// nodes, each listening on port 9080 with the sample's listenPort variable.
func benchPipeline(ns string, i int) *pipelinev1.Pipeline {
	p := &pipelinev1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pipeline-%04d", i), Namespace: ns},
		Spec: pipelinev1.PipelineSpec{
			ModelStorage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS,
				NFS: &pipelinev1.NFSStorage{Server: "nfs.bench.invalid", Path: "/models"}},
		},
	}
	for s := range benchSteps {
		p.Spec.Steps = append(p.Spec.Steps, pipelinev1.Step{Name: fmt.Sprintf("step-%d", s+1), Image: "nginx:latest",
			Model: fmt.Sprintf("model-%d", s), Port: ptr.To[int32](9080),
			Env: []corev1.EnvVar{{Name: pipelinev1.ListenPortEnv, Value: "9080"}}})
	}
	return p
}

// parallel runs f for 0..n-1 on benchWriters goroutines and returns the first error.
func parallel(n int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchWriters)
	for range benchWriters {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// floorRound is the raw-write floor: n Pipelines in namespace ns, with their finalizer, and the
// exact objects the operator makes for them (the same objects, created as the operator creates
// them), plus its status write, by the same parallel writers, with no operator and no webhook.
func floorRound(t *testing.T, c client.Client, ns string, n int) time.Duration {
	t.Helper()
	ctx := context.Background()
	scheme := runtimeScheme()
	start := time.Now()
	err := parallel(n, func(i int) error {
		// With the finalizer the defaulting webhook gives a new Pipeline.
		p := benchPipeline(ns, i)
		p.Finalizers = []string{pipeline.Finalizer}
		if err := c.Create(ctx, p); err != nil {
			return err
		}
		desired := []apiruntime.ApplyConfiguration{resources.PV(p, "", resources.InlineVolumeSource(p)), resources.PVC(p, ""),
			resources.StepsNetworkPolicy(p)}
		for s := range p.Spec.Steps {
			desired = append(desired, resources.StepDeployment(p, s, "", "", ""), resources.StepService(p, s))
		}
		for _, d := range desired {
			u, err := apply.Stamped(d)
			if err != nil {
				return err
			}
			obj, err := scheme.New(u.GroupVersionKind())
			if err != nil {
				return err
			}
			if err := apiruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				return err
			}
			if err := c.Create(ctx, obj.(client.Object), client.FieldOwner(apply.FieldManager)); err != nil {
				return err
			}
		}
		obs := status.NewObserved(len(p.Spec.Steps))
		statusPatch := client.MergeFrom(p.DeepCopy())
		p.Status = status.Compute(p, obs)
		return c.Status().Patch(ctx, p, statusPatch)
	})
	if err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// accountingRun holds the counts of one in-process operator run.
type accountingRun struct {
	writes        int64 // object writes (not events) until converged
	events        int64
	restartWrites int64
	resyncWrites  int64
	heapPerObject uint64
	heapGrowth    int64 // bytes
	cached        int64 // objects
}

// requestCounter counts a manager's writes, events apart.
type requestCounter struct{ writes, events atomic.Int64 }

// roundTripperFunc is a function as an http.RoundTripper.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func (rc *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet {
			if strings.Contains(req.URL.Path, "/events") {
				rc.events.Add(1)
			} else {
				rc.writes.Add(1)
			}
		}
		return rt.RoundTrip(req)
	})
}

// benchManager runs a manager with the operator's cache settings and returns its request
// counter, a function that counts its passes and a stop function.
func benchManager(t *testing.T, cfg *rest.Config, concurrency int, syncPeriod *time.Duration, withEvents bool) (*requestCounter, func() int64, func()) {
	t.Helper()
	rc := &requestCounter{}
	mcfg := rest.CopyConfig(cfg)
	mcfg.Wrap(rc.wrap)
	opts := apply.CacheOptions()
	opts.SyncPeriod = syncPeriod
	mgr, err := ctrl.NewManager(mcfg, ctrl.Options{
		Scheme: runtimeScheme(), Metrics: metricsserver.Options{BindAddress: "0"}, Cache: opts,
	})
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := metrics.New(prometheus.NewRegistry(), mgr.GetCache())
	if err != nil {
		t.Fatal(err)
	}
	var recorder events.EventRecorder = discardEvents{}
	if withEvents {
		recorder = mgr.GetEventRecorder("pipeline-operator")
	}
	r := &pipeline.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder, Metrics: metrics}
	if err := r.SetupWithManager(mgr, func(b *builder.Builder) {
		b.WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, SkipNameValidation: ptr.To(true)})
	}); err != nil {
		t.Fatal(err)
	}
	// The managers of a run are started one after another, and each counts from its start.
	before := reconcilePasses(t)
	passes := func() int64 { return reconcilePasses(t) - before }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Error(err)
		}
	}()
	return rc, passes, func() { cancel(); <-done }
}

// reconcilePasses is how many passes the Pipeline controllers of this process have finished, as
// controller-runtime counts them: controller_runtime_reconcile_total{controller="pipeline"}.
func reconcilePasses(t *testing.T) int64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var passes float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "pipeline" {
					passes += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int64(passes)
}

// discardEvents records nothing: it measures what events cost.
type discardEvents struct{}

func (discardEvents) Eventf(apiruntime.Object, apiruntime.Object, string, string, string, string, ...any) {
}

// benchAccounting counts what the operator writes: it runs the reconciler in this process
// (with the operator's cache settings, no webhooks) while n Pipelines are created, counts its
// writes and events, then starts a new manager against the converged Pipelines, counts its
// writes on restart and on a resync, and measures its heap per cached object. Nothing here is
// timed.
func benchAccounting(t *testing.T, n, concurrency int) accountingRun {
	cfg, c, stopEnv := startBenchEnv(t, "bench")
	defer stopEnv()
	ctx := context.Background()
	var run accountingRun

	rc, _, stop := benchManager(t, cfg, concurrency, nil, true)
	wait := watchConverged(t, cfg, "bench", n)
	// As the defaulting webhook would, which this run does not serve, the creates carry the finalizer.
	if err := parallel(n, func(i int) error {
		p := benchPipeline("bench", i)
		p.Finalizers = []string{pipeline.Finalizer}
		return c.Create(ctx, p)
	}); err != nil {
		t.Fatal(err)
	}
	wait()
	// Let the passes that the operator's own writes trigger run out before counting.
	settle(rc)
	run.writes, run.events = rc.writes.Load(), rc.events.Load()
	stop()

	before := resourceVersions(t, c)
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	resync := 5 * time.Second
	rc, passes, stop := benchManager(t, cfg, concurrency, &resync, true)
	waitPasses(t, passes, int64(n))
	run.restartWrites = rc.writes.Load() + rc.events.Load()
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	run.cached = int64(n * cachedPerPipeline)
	run.heapGrowth = int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	if run.heapGrowth > 0 {
		run.heapPerObject = uint64(run.heapGrowth / run.cached)
	}
	waitPasses(t, passes, int64(2*n)) // a resync reconciles every Pipeline again
	run.resyncWrites = rc.writes.Load() + rc.events.Load() - run.restartWrites
	stop()
	if after := resourceVersions(t, c); !equalMaps(before, after) {
		t.Errorf("N=%d: a restart or resync changed %d objects", n, diffCount(before, after))
	}
	return run
}

// benchForeign measures how much the operator's heap grows when 5000 Deployments and Services
// that it does not manage exist in the cluster.
func benchForeign(t *testing.T) int64 {
	cfg, c, stopEnv := startBenchEnv(t, "foreign")
	defer stopEnv()
	ctx := context.Background()
	_, _, stop := benchManager(t, cfg, defaultConcurrency, nil, true)
	defer stop()
	time.Sleep(2 * time.Second) // caches synced
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	err := parallel(5000, func(i int) error {
		name := fmt.Sprintf("foreign-%04d", i)
		if i%2 == 0 {
			return c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "foreign"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": name}}})
		}
		labels := map[string]string{"app": name}
		return c.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "foreign"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:latest"}}}}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	return int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
}

// watchConverged watches the Pipelines of namespace ns and returns a function that waits until
// n carry the status of their generation; a watch loads the apiserver far less than polling.
func watchConverged(t *testing.T, cfg *rest.Config, ns string, n int) func() {
	t.Helper()
	ctx := context.Background()
	wc, err := client.NewWithWatch(cfg, benchScheme())
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &pipelinev1.PipelineList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	done := map[string]bool{}
	see := func(obj apiruntime.Object) {
		if p, ok := obj.(*pipelinev1.Pipeline); ok &&
			p.Status.ObservedGeneration == p.Generation && len(p.Status.Steps) == benchSteps {
			done[p.Name] = true
		}
	}
	// rewatch lists the Pipelines and watches on from there: the apiserver may end a watch at
	// any time.
	rewatch := func() {
		list := &pipelinev1.PipelineList{}
		if err := wc.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			see(&list.Items[i])
		}
		if w, err = wc.Watch(ctx, &pipelinev1.PipelineList{}, client.InNamespace(ns),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}}); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		defer func() { w.Stop() }()
		// A guard against a hang, not a goal: a round at 10,000 takes over an hour here.
		timeout := time.After(max(30*time.Minute, time.Duration(n)*time.Second))
		for len(done) < n {
			select {
			case ev, ok := <-w.ResultChan():
				switch {
				case !ok || ev.Type == watch.Error:
					t.Logf("the watch of Pipelines ended (%d of %d converged): watching on", len(done), n)
					w.Stop()
					rewatch()
				default:
					see(ev.Object)
				}
			case <-timeout:
				t.Fatalf("only %d of %d Pipelines converged", len(done), n)
			}
		}
	}
}

// settle waits until a manager has made no request for a second.
func settle(rc *requestCounter) {
	last := int64(-1)
	for {
		now := rc.writes.Load() + rc.events.Load()
		if now == last {
			return
		}
		last = now
		time.Sleep(time.Second)
	}
}

func waitPasses(t *testing.T, passes func() int64, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for passes() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d passes", passes(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
}

// resourceVersions maps every object the operator made, and every Pipeline, to its resourceVersion.
func resourceVersions(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	rv := map[string]string{}
	lists := []client.ObjectList{&pipelinev1.PipelineList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{},
		&corev1.PersistentVolumeClaimList{}, &corev1.PersistentVolumeList{}, &networkingv1.NetworkPolicyList{}}
	for _, l := range lists {
		if err := c.List(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		if err := meta.EachListItem(l, func(item apiruntime.Object) error {
			o, err := meta.Accessor(item)
			if err != nil {
				return err
			}
			rv[fmt.Sprintf("%T/%s/%s", item, o.GetNamespace(), o.GetName())] = o.GetResourceVersion()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return rv
}

func equalMaps(a, b map[string]string) bool { return diffCount(a, b) == 0 }

func diffCount(a, b map[string]string) int {
	n := 0
	for k, v := range a {
		if b[k] != v {
			n++
		}
	}
	return n + max(0, len(b)-len(a))
}

// convergeRow holds the runs of every side at one size.
type convergeRow struct {
	n          int
	runs       map[string][]sideRun // by side
	accounting accountingRun
}

func (r convergeRow) converges(side string) []time.Duration {
	var ds []time.Duration
	for _, run := range r.runs[side] {
		ds = append(ds, run.converge)
	}
	return ds
}

func (r convergeRow) median(side string) time.Duration { return medianDuration(r.converges(side)) }

// ratio is the ratio of the medians of side and the floor.
func (r convergeRow) ratio(side string) float64 {
	return r.median(side).Seconds() / r.median("floor").Seconds()
}

// cpuPerPipeline is the median, over the runs of side, of what f reads from a run, per Pipeline.
func (r convergeRow) cpuPerPipeline(side string, f func(cpuTimes) time.Duration) time.Duration {
	var ds []time.Duration
	for _, run := range r.runs[side] {
		ds = append(ds, f(run.cpu)/time.Duration(r.n))
	}
	return medianDuration(ds)
}

type sweepRow struct {
	concurrency, n int
	converge       time.Duration
}

type benchReport struct {
	started       time.Time
	runs          int
	before        string   // BENCH_BEFORE
	sides         []string // floor, operator, and the operator before
	rows          []convergeRow
	profiles      []sideProfile
	sweep         []sweepRow
	foreignGrowth int64
}

// minWritesPerPipeline is the least an operator can write for a new Pipeline that the defaulting
// webhook gave its finalizer: the PV, the PVC, a Deployment and a Service per step, the steps'
// NetworkPolicy, and one status.
const minWritesPerPipeline = 2 + 2*benchSteps + 1 + 1

func seconds(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%.2f", d.Seconds()))
	}
	return strings.Join(parts, ", ") + " s"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func (r *benchReport) markdown() string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# Performance\n\nMeasured by `make bench` on %s (%s/%s, %d CPUs, %s), %s.\n",
		host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), r.started.UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString(`
## Method

Two sides do the same work, each in a kube-apiserver and etcd of its own (envtest, Service
range widened to /12), started fresh for every run; no built-in controller runs, so
"converged" means every child exists and every Pipeline carries the status of its first
generation. 16 parallel writers create N Pipelines of 3 steps, in v1, the version the
apiserver stores: no request is converted.

- **floor**: the least work that yields the same objects. The writers create the Pipelines
  and, themselves, exact copies of every object the operator makes (the same create
  requests), its finalizer patch and the status it writes. No operator runs and the
  apiserver calls no webhook.
- **operator**: the writers create only the Pipelines. The operator's manager (the binary of
  cmd/, --max-concurrent-reconciles ` + strconv.Itoa(defaultConcurrency) + `) runs in a process of its own, as its own user,
  with its mutating and validating webhooks registered (config/webhook) and served by it: every
  create and update of a Pipeline goes through both, and the validating webhook's
  SubjectAccessReview of the inline NFS storage is in the loop.
- **a run** of a side starts its control plane (and operator), runs a warm-up round of N
  Pipelines, untimed, then the timed round of N more: every side is timed on an equally full
  store, with its connections and caches warm. The time is from the first create of the timed
  round to the last Pipeline converged (watched, not polled).
- **runs alternate**: the floor goes first in odd runs and last in even ones; the figures are
  the medians of the runs, and the ratio is the ratio of the medians.
- **CPU** of each process in the timed round, read from the kernel (/proc, getrusage):
  kube-apiserver, etcd, the operator, and the benchmark's own process (the writers; on the
  floor, also building the children and statuses it writes).
`)
	fmt.Fprintf(&b, "\n## Convergence\n\n%d runs of each side; goal: operator ≤ 1.25 × the floor.\n\n", r.runs)
	b.WriteString("| N |")
	for _, s := range r.sides {
		fmt.Fprintf(&b, " %s (runs) | %s (median) |", s, s)
	}
	for _, s := range r.sides[1:] {
		fmt.Fprintf(&b, " ratio, %s |", s)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|---|", len(r.sides)) + strings.Repeat("---|", len(r.sides)-1) + "\n")
	for _, row := range r.rows {
		fmt.Fprintf(&b, "| %d |", row.n)
		for _, s := range r.sides {
			fmt.Fprintf(&b, " %s | %.2f s |", seconds(row.converges(s)), row.median(s).Seconds())
		}
		for _, s := range r.sides[1:] {
			fmt.Fprintf(&b, " %.2f |", row.ratio(s))
		}
		b.WriteString("\n")
	}
	if r.before != "" {
		fmt.Fprintf(&b, "\n\"operator at %s\" is the code at that revision (`BENCH_BEFORE=%s`), built and run by the same\n"+
			"harness in the same runs, with the CRDs and webhook configurations of that revision.\n", r.before, r.before)
	}

	b.WriteString("\n## CPU per Pipeline\n\nMedians over the runs of the timed round, per Pipeline.\n\n| N | process |")
	for _, s := range r.sides {
		fmt.Fprintf(&b, " %s |", s)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(r.sides)) + "\n")
	procs := []struct {
		name string
		f    func(cpuTimes) time.Duration
	}{
		{"kube-apiserver", func(c cpuTimes) time.Duration { return c.apiserver }},
		{"etcd", func(c cpuTimes) time.Duration { return c.etcd }},
		{"operator", func(c cpuTimes) time.Duration { return c.operator }},
		{"writers (benchmark process)", func(c cpuTimes) time.Duration { return c.bench }},
		{"all", func(c cpuTimes) time.Duration { return c.apiserver + c.etcd + c.operator + c.bench }},
	}
	for _, row := range r.rows {
		for _, p := range procs {
			fmt.Fprintf(&b, "| %d | %s |", row.n, p.name)
			for _, s := range r.sides {
				fmt.Fprintf(&b, " %s |", ms(row.cpuPerPipeline(s, p.f)))
			}
			b.WriteString("\n")
		}
	}

	b.WriteString("\n## Admission\n\nWhat the apiserver spent calling the operator's webhooks in the timed round (its " +
		"apiserver_admission_webhook_admission_duration_seconds and apiserver_request_total metrics), medians over the runs.\n\n" +
		"| N | side | webhook | calls per Pipeline | wall-clock per call | SubjectAccessReviews per Pipeline |\n|---|---|---|---|---|---|\n")
	for _, row := range r.rows {
		for _, s := range r.sides[1:] {
			var names []string
			for name := range row.runs[s][0].webhooks.calls {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				var calls, per, reviews []time.Duration // scaled by 1000 to keep the median's type
				for _, run := range row.runs[s] {
					c := run.webhooks.calls[name]
					calls = append(calls, time.Duration(c*1000/float64(row.n)))
					if c > 0 {
						per = append(per, time.Duration(run.webhooks.seconds[name]/c*float64(time.Second)))
					}
					reviews = append(reviews, time.Duration(run.webhooks.reviews*1000/float64(row.n)))
				}
				perCall := "–"
				if len(per) > 0 {
					perCall = ms(medianDuration(per))
				}
				fmt.Fprintf(&b, "| %d | %s | %s | %.2f | %s | %.2f |\n", row.n, s, name,
					float64(medianDuration(calls))/1000, perCall, float64(medianDuration(reviews))/1000)
			}
		}
	}

	if len(r.profiles) > 0 {
		n := r.rows[0].n
		fmt.Fprintf(&b, "\n## Where the CPU goes\n\nOne more run of the floor and of the operator at N=%d, with a CPU profile of the "+
			"apiserver (its /debug/pprof) and of the operator (--pprof-bind-address) taken through the timed round, "+
			"for as long as the side's median round. A sample belongs to the first area, in the order listed, "+
			"with a function of its stack in that area; the rest is \"other\" (HTTP serving, filters, the "+
			"registry's own work). Per Pipeline.\n\n", n)
		var floor, op sideProfile
		for _, p := range r.profiles {
			if p.side == "floor" {
				floor = p
			} else {
				op = p
			}
		}
		perPipeline := func(sec float64) string { return fmt.Sprintf("%.1f ms", sec*1000/float64(n)) }
		b.WriteString("| kube-apiserver | floor | operator | difference |\n|---|---|---|---|\n")
		for _, a := range append(slices.Clone(apiserverAreas), profileArea{name: "other"}) {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", a.name, perPipeline(floor.apiserver[a.name]),
				perPipeline(op.apiserver[a.name]), perPipeline(op.apiserver[a.name]-floor.apiserver[a.name]))
		}
		fmt.Fprintf(&b, "| all | %s | %s | %s |\n", perPipeline(floor.apiserverCPU), perPipeline(op.apiserverCPU),
			perPipeline(op.apiserverCPU-floor.apiserverCPU))
		b.WriteString("\n| operator | per Pipeline | share |\n|---|---|---|\n")
		for _, a := range append(slices.Clone(operatorAreas), profileArea{name: "other"}) {
			share := 0.0
			if op.operatorCPU > 0 {
				share = op.operator[a.name] / op.operatorCPU * 100
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f %% |\n", a.name, perPipeline(op.operator[a.name]), share)
		}
		fmt.Fprintf(&b, "| all | %s | 100 %% |\n", perPipeline(op.operatorCPU))
	}

	b.WriteString(`
## Writes, restarts and memory

Counted apart, untimed: the reconciler runs in the benchmark's process (the operator's cache
settings, no webhooks) while the writers create N Pipelines, with the finalizer that the
defaulting webhook gives them in a cluster.

- **writes**: the operator's object writes per Pipeline (the minimum is ` + strconv.Itoa(minWritesPerPipeline) + `: PV, PVC,
  3 Deployments, 3 Services, the steps' NetworkPolicy, status); events are counted apart. A
  pass that runs before the cache shows a child made by the pass before sends a create that the
  apiserver refuses as already existing: it is counted too, which is when the figure exceeds ` + strconv.Itoa(minWritesPerPipeline) + `.
- **restart / resync**: a new manager starts against the converged Pipelines and reconciles
  every one; then a 5 s cache resync reconciles every one again. Writes and events counted;
  resourceVersions of every Pipeline and child compared before and after.
- **heap/object**: growth of the Go heap (after GC) while the new manager fills its cache,
  divided by the objects it caches (Pipelines, PVs, PVCs, Deployments, Services, NetworkPolicies).

| N | writes/Pipeline | events/Pipeline | restart writes | resync writes | heap/object (target ≤ 4 KiB) |
|---|---|---|---|---|---|
`)
	for _, row := range r.rows {
		a := row.accounting
		fmt.Fprintf(&b, "| %d | %.2f | %.2f | %d | %d | %d B |\n", row.n, float64(a.writes)/float64(row.n),
			float64(a.events)/float64(row.n), a.restartWrites, a.resyncWrites, a.heapPerObject)
	}
	if len(r.rows) > 1 {
		// The slope between the two largest sizes: what one more cached object costs, without the
		// informers' fixed share that weighs on the small sizes.
		a, z := r.rows[len(r.rows)-2].accounting, r.rows[len(r.rows)-1].accounting
		if z.cached > a.cached {
			slope := float64(z.heapGrowth-a.heapGrowth) / float64(z.cached-a.cached)
			fmt.Fprintf(&b, "\nHeap per additional cached object, from N=%d to N=%d: %.0f B; the remainder, %.2f MiB, is the\n"+
				"informers' fixed share, which is why heap/object is higher at small N.\n",
				r.rows[len(r.rows)-2].n, r.rows[len(r.rows)-1].n, slope, (float64(z.heapGrowth)-slope*float64(z.cached))/(1<<20))
		}
	}
	fmt.Fprintf(&b, "\nHeap growth with 5000 foreign Deployments and Services (no operator labels) created while the\noperator runs: %.2f MiB (target ≤ 2 MiB).\n",
		float64(r.foreignGrowth)/(1<<20))
	if len(r.sweep) > 0 {
		fmt.Fprintf(&b, "\n## MaxConcurrentReconciles\n\nOne run of the operator side (as above, webhooks served) at N=%d per setting.\n\n"+
			"| --max-concurrent-reconciles | operator converge |\n|---|---|\n", r.sweep[0].n)
		for _, s := range r.sweep {
			fmt.Fprintf(&b, "| %d | %.2f s |\n", s.concurrency, s.converge.Seconds())
		}
		fmt.Fprintf(&b, "\nThe manager's default is %d. On a shared 2-core machine these figures trade places from run to "+
			"run: a guide, not a ranking.\n", defaultConcurrency)
	}
	b.WriteString(`
## What the operator does beyond the floor

- its webhooks: the apiserver calls the mutating and the validating webhook on every create
  and update of a Pipeline (TLS, an AdmissionReview each way), and the validating webhook asks
  the apiserver a SubjectAccessReview for inline NFS or CSI storage;
- it records events on the Pipeline;
- the apiserver streams every write back to the operator's informers, which the floor's
  writers do not watch;
- it compares every child it reads with what it would write, on the same two cores as the
  apiserver and etcd.

A converged Pipeline costs nothing: passes that find nothing to change compare the children in
the cache with what they would apply and write nothing, which the restart and resync columns
show.

Reproduce with ` + "`make bench`" + ` (` + "`make bench BENCH_SIZES=200 BENCH_RUNS=5 BENCH_BEFORE=<revision>`" + ` to compare
with an earlier revision). The router's data path is measured apart by ` + "`make bench-router`" + `, which
writes [performance-router.md](performance-router.md).
`)
	return b.String()
}
