package pipeline

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
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
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// TestBench measures the operator against the fastest the apiserver allows on the same
// machine, and writes the figures to $BENCH_OUTPUT (make bench: docs/performance.md). Every
// figure is a ratio against a baseline of the same run, or a count; no assertion is timed.
func TestBench(t *testing.T) {
	out := os.Getenv("BENCH_OUTPUT")
	if out == "" || os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("BENCH_OUTPUT and KUBEBUILDER_ASSETS are not set: run `make bench`")
	}
	sizes := []int{100, 300, 1000}
	if s := os.Getenv("BENCH_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("BENCH_SIZES: %v", err)
			}
			sizes = append(sizes, n)
		}
		sort.Ints(sizes)
	}
	ctrl.SetLogger(logr.Discard())
	report := &benchReport{started: time.Now()}

	for _, n := range sizes {
		floor := benchFloor(t, n)
		op := benchOperator(t, n, defaultConcurrency, true, true)
		quiet := benchOperator(t, n, defaultConcurrency, false, false)
		report.rows = append(report.rows, benchRow{n: n, floor: floor, op: op, quiet: quiet.converge})
		t.Logf("N=%d floor %s operator %s ratio %.2f writes/pipeline %.2f events/pipeline %.2f restart writes %d resync writes %d heap/object %d B",
			n, floor.Round(time.Millisecond), op.converge.Round(time.Millisecond), op.converge.Seconds()/floor.Seconds(),
			float64(op.writes)/float64(n), float64(op.events)/float64(n), op.restartWrites, op.resyncWrites, op.heapPerObject)
	}

	sweepN := sizes[len(sizes)/2]
	sweep := []int{1, 2, 4, 8}
	if os.Getenv("BENCH_SWEEP") == "off" {
		sweep = nil
	}
	for _, c := range sweep {
		op := benchOperator(t, sweepN, c, false, true)
		report.sweep = append(report.sweep, sweepRow{concurrency: c, n: sweepN, converge: op.converge})
		t.Logf("MaxConcurrentReconciles=%d N=%d converge %s", c, sweepN, op.converge.Round(time.Millisecond))
	}
	report.foreignGrowth = benchForeign(t)

	// The section of TestBenchNodeEvents stays.
	if err := os.WriteFile(out, []byte(keepNodeEvents(out, report.markdown())), 0o644); err != nil {
		t.Fatal(err)
	}
}

// defaultConcurrency is the manager's --max-concurrent-reconciles default, chosen by the sweep.
const defaultConcurrency = 4

const (
	benchWriters = 16
	benchSteps   = 3
)

// startBenchEnv starts a fresh kube-apiserver and etcd with room for thousands of Services,
// and returns its config and a client, with namespace ns created.
func startBenchEnv(t *testing.T, ns string) (*rest.Config, client.Client) {
	t.Helper()
	env := testenv.New()
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/12")
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	// Every client here reads and writes v1, the stored version: the apiserver calls no
	// conversion webhook. The one the CRD names is served all the same, as in a cluster.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := testenv.ServeConversion(ctx, env); err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // as ctrl.GetConfig: the apiserver's priority and fairness limits, not the client
	c, err := client.New(cfg, benchScheme())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return cfg, c
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

// benchFloor is the raw-write floor: the Pipelines and the exact objects the operator makes for
// them (the same objects, created as the operator creates them), plus its finalizer and status
// writes, by parallel writers.
func benchFloor(t *testing.T, n int) time.Duration {
	_, c := startBenchEnv(t, "bench")
	ctx := context.Background()
	scheme := runtimeScheme()
	start := time.Now()
	err := parallel(n, func(i int) error {
		p := benchPipeline("bench", i)
		if err := c.Create(ctx, p); err != nil {
			return err
		}
		patch := client.MergeFrom(p.DeepCopy())
		p.Finalizers = []string{Finalizer}
		if err := c.Patch(ctx, p, patch); err != nil {
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
		obs := newScope(p).obs
		statusPatch := client.MergeFrom(p.DeepCopy())
		p.Status = status.Compute(p, obs)
		return c.Status().Patch(ctx, p, statusPatch)
	})
	if err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// operatorRun holds the figures of one operator run.
type operatorRun struct {
	converge      time.Duration
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
// counter, its reconcile count and a stop function.
func benchManager(t *testing.T, cfg *rest.Config, concurrency int, syncPeriod *time.Duration, withEvents bool) (*requestCounter, *atomic.Int64, func()) {
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
	passes := &atomic.Int64{}
	var recorder events.EventRecorder = discardEvents{}
	if withEvents {
		recorder = mgr.GetEventRecorder("pipeline-operator")
	}
	r := &countingReconciler{Reconciler: &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: recorder, Metrics: metrics}, passes: passes}
	if err := r.SetupWithManager(mgr, func(b *builder.Builder) {
		b.WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, SkipNameValidation: ptr.To(true)})
	}); err != nil {
		t.Fatal(err)
	}
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

// discardEvents records nothing: it measures what events cost.
type discardEvents struct{}

func (discardEvents) Eventf(apiruntime.Object, apiruntime.Object, string, string, string, string, ...any) {
}

// countingReconciler counts the passes of the reconciler it wraps.
type countingReconciler struct {
	*Reconciler
	passes *atomic.Int64
}

func (r *countingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer r.passes.Add(1)
	return r.Reconciler.Reconcile(ctx, req)
}

func (r *countingReconciler) SetupWithManager(mgr ctrl.Manager, opts ...func(*builder.Builder)) error {
	if err := setupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	b := r.watches(ctrl.NewControllerManagedBy(mgr).For(&pipelinev1.Pipeline{}))
	for _, o := range opts {
		o(b)
	}
	return b.Complete(r)
}

// benchOperator creates n Pipelines with the same parallel writers as the floor while the
// operator runs, and waits until every one carries its first status.
func benchOperator(t *testing.T, n, concurrency int, full, withEvents bool) operatorRun {
	cfg, c := startBenchEnv(t, "bench")
	ctx := context.Background()
	var run operatorRun

	rc, _, stop := benchManager(t, cfg, concurrency, nil, withEvents)
	wait := watchConverged(t, cfg, n)
	start := time.Now()
	if err := parallel(n, func(i int) error { return c.Create(ctx, benchPipeline("bench", i)) }); err != nil {
		t.Fatal(err)
	}
	wait()
	run.converge = time.Since(start)
	// Let the passes that the operator's own writes trigger run out before counting.
	settle(rc)
	run.writes, run.events = rc.writes.Load(), rc.events.Load()
	stop()
	if !full {
		return run
	}

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
	run.cached = int64(n * (1 + 2 + 2*benchSteps + 1)) // Pipeline, PV, PVC, Deployments, Services, NetworkPolicy
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
	cfg, c := startBenchEnv(t, "foreign")
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

// watchConverged watches the Pipelines of the run and returns a function that waits until n
// carry the status of their generation; a watch loads the apiserver far less than polling.
func watchConverged(t *testing.T, cfg *rest.Config, n int) func() {
	t.Helper()
	ctx := context.Background()
	wc, err := client.NewWithWatch(cfg, benchScheme())
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &pipelinev1.PipelineList{}, client.InNamespace("bench"))
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
		if err := wc.List(ctx, list, client.InNamespace("bench")); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			see(&list.Items[i])
		}
		if w, err = wc.Watch(ctx, &pipelinev1.PipelineList{}, client.InNamespace("bench"),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}}); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		defer func() { w.Stop() }()
		timeout := time.After(30 * time.Minute)
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

func waitPasses(t *testing.T, passes *atomic.Int64, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for passes.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d passes", passes.Load(), n)
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
		for _, o := range objects(l) {
			rv[fmt.Sprintf("%T/%s/%s", o, o.GetNamespace(), o.GetName())] = o.GetResourceVersion()
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

type benchRow struct {
	n     int
	floor time.Duration
	op    operatorRun
	quiet time.Duration // the operator with events discarded
}

type sweepRow struct {
	concurrency, n int
	converge       time.Duration
}

type benchReport struct {
	started       time.Time
	rows          []benchRow
	sweep         []sweepRow
	foreignGrowth int64
}

// minWritesPerPipeline is the least an operator can write for a new Pipeline: its finalizer,
// the PV, the PVC, a Deployment and a Service per step, the steps' NetworkPolicy, and one status.
const minWritesPerPipeline = 1 + 2 + 2*benchSteps + 1 + 1

func (r *benchReport) markdown() string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# Performance\n\nMeasured by `make bench` on %s (%s/%s, %d CPUs, %s), %s.\n",
		host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), r.started.UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString(`Each run starts a fresh kube-apiserver and etcd (envtest, Service range widened to /12) and
creates N Pipelines of 3 steps with 16 parallel writers. No built-in controller runs, so
"converged" means every child exists and every Pipeline carries the status of its first
generation. The writers, like the operator, create, read and watch Pipelines in v1, the version
the apiserver stores: no request goes through the conversion webhook.

- **floor**: the same writers create the Pipelines and, themselves, every object the operator
  would make (with the same create requests), its finalizer and a status: the fastest this
  apiserver takes the same object mix on this machine.
- **operator**: the writers create only the Pipelines; the operator (MaxConcurrentReconciles
  ` + strconv.Itoa(defaultConcurrency) + `) does the rest. Time from the first create to the last Pipeline converged.
- **writes**: the operator's object writes per Pipeline (the minimum is ` + strconv.Itoa(minWritesPerPipeline) + `: finalizer, PV,
  PVC, 3 Deployments, 3 Services, the steps' NetworkPolicy, status); events are counted apart. A pass that runs before
  the cache shows a child made by the pass before sends a create that the apiserver refuses as
  already existing: it is counted too, which is when the figure exceeds ` + strconv.Itoa(minWritesPerPipeline) + `.
- **restart / resync**: a new manager starts against the converged Pipelines and reconciles
  every one; then a 5 s cache resync reconciles every one again. Writes and events counted;
  resourceVersions of every Pipeline and child compared before and after.
- **heap/object**: growth of the Go heap (after GC) while the new manager fills its cache,
  divided by the objects it caches (Pipelines, PVs, PVCs, Deployments, Services, NetworkPolicies).

- **without events**: the same operator run with its events discarded, to show what the events
  cost the apiserver.

| N | floor | operator | ratio (target ≤ 1.25) | without events | writes/Pipeline | events/Pipeline | restart writes | resync writes | heap/object (target ≤ 4 KiB) |
|---|---|---|---|---|---|---|---|---|---|
`)
	for _, row := range r.rows {
		fmt.Fprintf(&b, "| %d | %.2f s | %.2f s | %.2f | %.2f s (%.2f) | %.2f | %.2f | %d | %d | %d B |\n", row.n, row.floor.Seconds(),
			row.op.converge.Seconds(), row.op.converge.Seconds()/row.floor.Seconds(),
			row.quiet.Seconds(), row.quiet.Seconds()/row.floor.Seconds(), float64(row.op.writes)/float64(row.n),
			float64(row.op.events)/float64(row.n), row.op.restartWrites, row.op.resyncWrites, row.op.heapPerObject)
	}
	if len(r.rows) > 1 {
		// The slope between the two largest sizes: what one more cached object costs, without the
		// informers' fixed share that weighs on the small sizes.
		a, z := r.rows[len(r.rows)-2].op, r.rows[len(r.rows)-1].op
		if z.cached > a.cached {
			slope := float64(z.heapGrowth-a.heapGrowth) / float64(z.cached-a.cached)
			fmt.Fprintf(&b, "\nHeap per additional cached object, from N=%d to N=%d: %.0f B; the remainder, %.2f MiB, is the\n"+
				"informers' fixed share, which is why heap/object is higher at small N.\n",
				r.rows[len(r.rows)-2].n, r.rows[len(r.rows)-1].n, slope, (float64(z.heapGrowth)-slope*float64(z.cached))/(1<<20))
		}
	}
	fmt.Fprintf(&b, "\nHeap growth with 5000 foreign Deployments and Services (no operator labels) created while the\noperator runs: %.2f MiB (target ≤ 2 MiB).\n",
		float64(r.foreignGrowth)/(1<<20))
	b.WriteString("\n## MaxConcurrentReconciles\n\n| MaxConcurrentReconciles | N | operator converge |\n|---|---|---|\n")
	sort.Slice(r.sweep, func(i, j int) bool { return r.sweep[i].concurrency < r.sweep[j].concurrency })
	best := time.Duration(0)
	for _, s := range r.sweep {
		fmt.Fprintf(&b, "| %d | %d | %.2f s |\n", s.concurrency, s.n, s.converge.Seconds())
		if best == 0 || s.converge < best {
			best = s.converge
		}
	}
	for _, s := range r.sweep {
		if s.converge == best {
			fmt.Fprintf(&b, "\nFastest in this run: %d. The manager's default (`--max-concurrent-reconciles`) is %d. "+
				"On a shared 2-core machine these figures trade places from run to run: a guide, not a ranking.\n",
				s.concurrency, defaultConcurrency)
		}
	}
	b.WriteString(`
## Where the time goes

The operator does more than the floor's writers, by design:

- it records events on the Pipeline: one per pass for the children it created, one per child
  it updates or deletes (the "without events" column shows their share);
- the apiserver streams every write back to the operator's informers, which the floor's
  writers do not watch;
- it compares every child it reads with what it would write (the JSON of both), on the same two
  cores as the apiserver and etcd.

Children are made with a plain create, which fails on an existing object of the same name: the
operator never takes over someone else's object, and knowing that costs no extra request. The
first update of a child (not measured here) costs two requests more than later ones: a read of
its managedFields and a patch that hands the fields of the create over to the apply.

A Pipeline whose spec changed looks for children of its earlier spec (a list of every child
kind in its namespace, from the cache); a new Pipeline skips that search, since its spec never
named other children.

A converged Pipeline costs nothing: passes that find nothing to change compare the children
in the cache with what they would apply and write nothing, which the restart and resync
columns show.
`)
	b.WriteString("\nReproduce with `make bench` (sizes: `make bench BENCH_SIZES=100,300,1000`).\n")
	b.WriteString("\nThe router's data path is measured apart by `make bench-router`, which writes\n" +
		"[performance-router.md](performance-router.md).\n")
	return b.String()
}
