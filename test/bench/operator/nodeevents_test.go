package operator

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/controller/pipeline"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

const (
	benchNodes          = 200
	benchNodeRounds     = 3 // interleaved runs of each variant; the median is reported
	nodeEventsBegin     = "<!-- begin: node events, written by TestBenchNodeEvents -->"
	nodeEventsEnd       = "<!-- end: node events -->"
	benchRouterInterval = 10 // every 10th Pipeline runs the router (dataPath.mode Router)
	benchBudgetInterval = 10 // every 10th Pipeline (from the 5th) has an unpinned step of 2 pods
	benchPools          = 20 // nodes and unpinned steps in pools, by their label benchPoolLabel
	benchPoolLabel      = "bench.pipeline/pool"
)

// TestBenchNodeEvents measures what one node event costs the operator's process with 1 000 (BENCH_NODE_PIPELINES)
// Pipelines over 200 nodes, with the cache indexes (internal/controller/pipeline/nodeindex.go,
// internal/nodes/index.go) and with the scanning implementation they replaced, in the same run
// against the same informer cache, and writes the figures as their own section of $BENCH_OUTPUT (make bench:
// docs/performance.md). The figures are ratios of the same run; no assertion is timed.
func TestBenchNodeEvents(t *testing.T) {
	out := os.Getenv("BENCH_OUTPUT")
	if out == "" || os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("BENCH_OUTPUT and KUBEBUILDER_ASSETS are not set: run `make bench`")
	}
	ctrl.SetLogger(logr.Discard())
	started := time.Now()
	// make bench-scale measures it with 10,000.
	benchNodePipelines := benchInts(t, "BENCH_NODE_PIPELINES", []int{1000})[0]
	cfg, c, _ := startBenchEnv(t, "bench")
	ctx := context.Background()

	names := make([]string, benchNodes)
	for i := range names {
		names[i] = fmt.Sprintf("bench-node-%03d", i)
	}
	if err := parallel(benchNodes, func(i int) error {
		return c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[i],
			Labels: map[string]string{corev1.LabelHostname: names[i], benchPoolLabel: benchPool(i)}}})
	}); err != nil {
		t.Fatal(err)
	}
	if err := parallel(benchNodePipelines, func(i int) error { return c.Create(ctx, benchNodePipeline("bench", i, names)) }); err != nil {
		t.Fatal(err)
	}

	// The manager's cache: the operator's cache options and indexes.
	opts := apply.CacheOptions()
	opts.Scheme = runtimeScheme()
	informers, err := cache.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := pipeline.SetupIndexes(ctx, informers); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = informers.Start(cctx) }()
	if !informers.WaitForCacheSync(cctx) {
		t.Fatal("the cache did not sync")
	}
	reader, err := client.New(cfg, client.Options{Scheme: runtimeScheme(), Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		t.Fatal(err)
	}
	nodeList := &corev1.NodeList{}
	pipelineList := &pipelinev1.PipelineList{}
	for deadline := time.Now().Add(time.Minute); ; {
		if err := reader.List(ctx, nodeList); err != nil {
			t.Fatal(err)
		}
		if err := reader.List(ctx, pipelineList); err != nil {
			t.Fatal(err)
		}
		if len(nodeList.Items) == benchNodes && len(pipelineList.Items) == benchNodePipelines {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache holds %d nodes and %d Pipelines", len(nodeList.Items), len(pipelineList.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}

	events := benchNodeEvents(nodeList.Items)
	r := &pipeline.Reconciler{Client: reader}
	before := nodeEvent{mapNode: func(ctx context.Context, _, node *corev1.Node) []reconcile.Request {
		return scanPipelinesOnNode(ctx, reader, node)
	}, lookup: scanLookup}
	after := nodeEvent{mapNode: r.NodeEventRequests, lookup: resolvedNode}

	// Before either is timed, both queue what they should for every event, and the lookups of
	// the Pipelines both queue find the same nodes.
	var pipelinesPerEvent, lookupsPerEvent, budgetsBefore, budgetsAfter float64
	for i := range events {
		e := &events[i]
		b, err := before.run(ctx, reader, e)
		if err != nil {
			t.Fatal(err)
		}
		a, err := after.run(ctx, reader, e)
		if err != nil {
			t.Fatal(err)
		}
		on, budgets, all := expectedNodeEvent(pipelineList.Items, e.after)
		if want := sortedUnion(on, all); !slices.Equal(b.requests, want) {
			t.Fatalf("node %s: the scan queues %v, want %v", e.after.Name, b.requests, want)
		}
		if want := sortedUnion(on, budgets); !slices.Equal(a.requests, want) {
			t.Fatalf("node %s: the indexes queue %v, want %v", e.after.Name, a.requests, want)
		}
		if len(on) == 0 || len(budgets) == 0 {
			t.Fatalf("node %s: no Pipeline runs on it (%d) or has a budget it may change (%d)", e.after.Name, len(on), len(budgets))
		}
		for req, found := range a.found {
			if !slices.Equal(b.found[req], found) {
				t.Fatalf("node %s, Pipeline %s: the scan finds %v, the indexes %v", e.after.Name, req, b.found[req], found)
			}
			lookupsPerEvent += float64(len(found)) / benchNodes
		}
		pipelinesPerEvent += float64(len(a.requests)) / benchNodes
		budgetsBefore += float64(len(all)) / benchNodes
		budgetsAfter += float64(len(budgets)) / benchNodes
	}

	var scans, indexed, scanMaps, indexMaps []testing.BenchmarkResult
	for range benchNodeRounds {
		scans = append(scans, benchmarkNodes(events, func(e *benchEvent) error { _, err := before.run(ctx, reader, e); return err }))
		indexed = append(indexed, benchmarkNodes(events, func(e *benchEvent) error { _, err := after.run(ctx, reader, e); return err }))
		scanMaps = append(scanMaps, benchmarkNodes(events, func(e *benchEvent) error { before.mapNode(ctx, e.before, e.after); return nil }))
		indexMaps = append(indexMaps, benchmarkNodes(events, func(e *benchEvent) error { after.mapNode(ctx, e.before, e.after); return nil }))
	}
	fig := nodeEventFigures{started: started, before: median(scans), after: median(indexed),
		beforeMap: median(scanMaps), afterMap: median(indexMaps), pipelines: pipelinesPerEvent, lookups: lookupsPerEvent,
		budgetsBefore: budgetsBefore, budgetsAfter: budgetsAfter, total: benchNodePipelines}
	t.Logf("per node event: before %s, %d allocs; after %s, %d allocs; map function alone: before %s, after %s; %.0f Pipelines (%.0f with a budget, %.0f before) and %.0f node lookups",
		time.Duration(fig.before.NsPerOp()), fig.before.AllocsPerOp(), time.Duration(fig.after.NsPerOp()), fig.after.AllocsPerOp(),
		time.Duration(fig.beforeMap.NsPerOp()), time.Duration(fig.afterMap.NsPerOp()), fig.pipelines, fig.budgetsAfter, fig.budgetsBefore, fig.lookups)

	doc, err := os.ReadFile(out)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte(withSection(string(doc), fig.markdown())), 0o644); err != nil {
		t.Fatal(err)
	}
}

// benchNodePipeline is the i-th Pipeline of the node-event run: the bench Pipeline with step s
// located on node 3i+s (mod 200) and falling back to node 3i+s+100, and every 10th running the
// router (dataPath.mode Router) on node 7i: about 30 Pipelines may run on each node. Every 10th
// from the 5th has instead an unpinned last step of 2 pods, confined by its nodeSelector to pool
// i/10 (mod 20), of 10 nodes: a step that may get a disruption budget.
func benchNodePipeline(ns string, i int, names []string) *pipelinev1.Pipeline {
	p := benchPipeline(ns, i)
	for s := range p.Spec.Steps {
		p.Spec.Steps[s].Location = names[(3*i+s)%len(names)]
		p.Spec.Steps[s].FallbackLocations = []string{names[(3*i+s+len(names)/2)%len(names)]}
	}
	if i%benchRouterInterval == 0 {
		p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter,
			Router: &pipelinev1.Router{Location: names[(7*i)%len(names)]}}
	}
	if i%benchBudgetInterval == benchBudgetInterval/2 {
		last := &p.Spec.Steps[len(p.Spec.Steps)-1]
		last.Location, last.FallbackLocations = "", nil
		last.Replicas = ptr.To[int32](2)
		last.NodeSelector = map[string]string{benchPoolLabel: benchPool(i / benchBudgetInterval)}
	}
	return p
}

// benchPool is the pool of node i, and the one unpinned step i/10 is confined to.
func benchPool(i int) string { return fmt.Sprintf("pool-%02d", i%benchPools) }

// benchEvent is a node event of the run: a ready node stops reporting (its Ready condition
// turns Unknown), the event that moves steps and changes how many nodes can hold pods.
type benchEvent struct {
	before, after *corev1.Node
}

// benchNodeEvents are the events of the run: one per node, as the cache holds it.
func benchNodeEvents(items []corev1.Node) []benchEvent {
	events := make([]benchEvent, len(items))
	for i := range items {
		ready := items[i].DeepCopy()
		ready.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		lost := ready.DeepCopy()
		lost.Status.Conditions[0].Status = corev1.ConditionUnknown
		events[i] = benchEvent{before: ready, after: lost}
	}
	return events
}

// expectedNodeEvent is what an event of node should queue, found by matching every Pipeline:
// the Pipelines that may run on it, those with a step that may get a disruption budget and
// whose nodeSelector picks it, and all those with such a step (what every event queued before
// the index of their nodeSelectors).
func expectedNodeEvent(items []pipelinev1.Pipeline, node *corev1.Node) (on, budgets, all []string) {
	for i := range items {
		p := &items[i]
		key := client.ObjectKeyFromObject(p).String()
		if names := mayRunOn(p); slices.Contains(names, nodes.Hostname(node)) || slices.Contains(names, node.Name) {
			on = append(on, key)
		}
		for s := range p.Spec.Steps {
			if !resources.NeedsDisruptionBudget(p, s) {
				continue
			}
			all = append(all, key)
			if labels.SelectorFromSet(p.Spec.Steps[s].NodeSelector).Matches(labels.Set(node.Labels)) {
				budgets = append(budgets, key)
			}
			break
		}
	}
	return on, budgets, all
}

// mayRunOn is every node name p may run on, as its spec says: each step's location and
// fallbackLocations, and the router's with dataPath.mode Router.
func mayRunOn(p *pipelinev1.Pipeline) []string {
	var out []string
	for i := range p.Spec.Steps {
		out = append(out, p.Spec.Steps[i].Locations()...)
	}
	return append(out, p.Spec.RouterSettings().Locations()...)
}

// sortedUnion is the sorted union of a and b.
func sortedUnion(a, b []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(a), b...))))
}

// nodeEvent is what one node event costs the operator's process, apart from the apiserver: the
// map function that turns the node, as it was and as it is, into requests, then, for every
// request, what its pass does to place the Pipeline's steps and router and to decide their
// disruption budgets: read the Pipeline, look up the node of every location, fallback location
// and router location, and count the nodes that can hold the pods of every step that may get a
// budget (Reconciler.TwoNodesCanHold).
type nodeEvent struct {
	mapNode func(ctx context.Context, before, after *corev1.Node) []reconcile.Request
	lookup  func(context.Context, client.Reader, string) (*corev1.Node, error)
}

// nodeEventResult is what one event found: its requests (sorted) and, for each, the node every
// lookup returned ("" for none), in order.
type nodeEventResult struct {
	requests []string
	found    map[string][]string
}

func (e nodeEvent) run(ctx context.Context, r client.Client, ev *benchEvent) (nodeEventResult, error) {
	res := nodeEventResult{found: map[string][]string{}}
	for _, req := range e.mapNode(ctx, ev.before, ev.after) {
		res.requests = append(res.requests, req.String())
	}
	sort.Strings(res.requests)
	counter := &pipeline.Reconciler{Client: r}
	for _, key := range res.requests {
		ns, name, _ := strings.Cut(key, "/")
		p := &pipelinev1.Pipeline{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
			return res, err
		}
		var locations []string
		for s := range p.Spec.Steps {
			locations = append(locations, p.Spec.Steps[s].Locations()...)
		}
		if rt := p.Spec.RouterSettings(); rt != nil && rt.Location != "" {
			locations = append(locations, rt.Location)
		}
		for _, l := range locations {
			node, err := e.lookup(ctx, r, l)
			if err != nil {
				return res, err
			}
			found := ""
			if node != nil {
				found = node.Name
			}
			res.found[key] = append(res.found[key], found)
		}
		for s := range p.Spec.Steps {
			if !resources.NeedsDisruptionBudget(p, s) {
				continue
			}
			if _, err := counter.TwoNodesCanHold(ctx, p.Spec.Steps[s].NodeSelector, p.Spec.Steps[s].Tolerations); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// benchmarkNodes times f on one event per iteration, over the events in turn.
func benchmarkNodes(events []benchEvent, f func(*benchEvent) error) testing.BenchmarkResult {
	runtime.GC()
	return testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := f(&events[i%len(events)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// median is the result with the median time per event.
func median(rs []testing.BenchmarkResult) testing.BenchmarkResult {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b testing.BenchmarkResult) int { return int(a.NsPerOp() - b.NsPerOp()) })
	return rs[len(rs)/2]
}

// scanPipelinesOnNode is the node-event map function the cache indexes replaced, kept as the
// baseline: it lists (and copies) every Pipeline and matches each one's locations, and queues
// every Pipeline with a step that may get a disruption budget, whichever node it is.
func scanPipelinesOnNode(ctx context.Context, c client.Reader, obj client.Object) []reconcile.Request {
	hostname := obj.GetLabels()[corev1.LabelHostname]
	if hostname == "" {
		hostname = obj.GetName()
	}
	list := &pipelinev1.PipelineList{}
	if err := c.List(ctx, list); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, p := range list.Items {
		if rt := p.Spec.RouterSettings(); rt != nil && (rt.Location == hostname || rt.Location == obj.GetName()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
			continue
		}
		for s, step := range p.Spec.Steps {
			if slices.Contains(step.Locations(), hostname) || slices.Contains(step.Locations(), obj.GetName()) ||
				resources.NeedsDisruptionBudget(&p, s) {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
				break
			}
		}
	}
	return reqs
}

// resolvedNode is the node a location names, as a pass resolves it (nodes.Resolve): by name,
// else through the hostname index.
func resolvedNode(ctx context.Context, r client.Reader, location string) (*corev1.Node, error) {
	res, err := nodes.Resolve(ctx, r, location)
	return res.Node, err
}

// scanLookup is the node lookup the cache index replaced, kept as the baseline: a label
// selector, which the cache answers by matching (and copying the matches of) every node.
func scanLookup(ctx context.Context, r client.Reader, hostname string) (*corev1.Node, error) {
	list := &corev1.NodeList{}
	if err := r.List(ctx, list, client.MatchingLabels{corev1.LabelHostname: hostname}); err != nil {
		return nil, fmt.Errorf("list nodes with %s=%s: %w", corev1.LabelHostname, hostname, err)
	}
	var found *corev1.Node
	for i := range list.Items {
		if found == nil || list.Items[i].Name < found.Name {
			found = &list.Items[i]
		}
	}
	return found, nil
}

type nodeEventFigures struct {
	started             time.Time
	before, after       testing.BenchmarkResult
	beforeMap, afterMap testing.BenchmarkResult // the map function alone
	pipelines, lookups  float64
	// budgetsBefore and budgetsAfter are the Pipelines per event with a step that may get a
	// disruption budget, before and after.
	budgetsBefore, budgetsAfter float64
	total                       int // Pipelines in the cache
}

func (f nodeEventFigures) markdown() string {
	var b strings.Builder
	host, _ := os.Hostname()
	b.WriteString(nodeEventsBegin + "\n")
	fmt.Fprintf(&b, "## Node events\n\nMeasured by TestBenchNodeEvents on %s (%s/%s, %d CPUs, %s), %s.\n",
		host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), f.started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, `A fresh kube-apiserver and etcd (envtest) hold %d Nodes, in %d pools of %d by a label, and %d
Pipelines of 3 steps: step s of Pipeline i is located on node 3i+s (mod %d), with node
3i+s+%d as its fallback location, every %dth Pipeline runs the router (dataPath.mode Router) on node 7i, and
every %dth (from the %dth) has instead an unpinned last step of 2 pods whose nodeSelector picks
one pool: a step that may get a disruption budget, which depends on how many nodes can hold its
pods. An informer cache (controller-runtime's cache.New, with the operator's
apply.CacheOptions and the indexes the reconciler registers) holds them all.

One node event is a ready node that stops reporting (its Ready condition turns Unknown), and
what the operator's process does for it: the controller's map function turns the node, as it
was and as it is, into requests, then, for every request, the pass reads the Pipeline from the
cache, looks up the node of every location, fallback location and router location (%.1f
lookups per event), and counts the nodes that can hold the pods of every step that may get a
budget (a list of the nodes its nodeSelector picks). An event queues %.1f Pipelines after, of
which %.1f with a budget (%.1f before). No request reaches the apiserver.

- **before**: the scanning implementation the indexes replaced (kept in
  test/bench/operator/nodeevents_test.go as the baseline): the map function lists and
  copies every Pipeline, and queues those that may run on the node and every one with a step
  that may get a budget; each lookup lists the nodes with a label selector, which the cache
  answers by matching every node.
- **after**: the map function and the lookups read the cache indexes of
  internal/controller/pipeline/nodeindex.go (Pipelines by the nodes they may run on),
  internal/nodes/index.go (Nodes by their kubernetes.io/hostname label) and
  internal/controller/pipeline/setup.go (Pipelines with a step that may get a budget by a label
  of its nodeSelector), and queue a Pipeline for its budget only when the node could hold the
  step's pods before the event and not after, or after and not before.

Each variant, and its map function alone, is timed by Go's testing.Benchmark, one event per
iteration over the %d nodes in turn, in the same process against the same cache, %d times in
turn; the median run of each is shown. Before timing, each variant is checked to queue what it
should for every event (matched against every Pipeline), and both to find the same nodes for the
Pipelines both queue.

| per node event | time | allocations | bytes allocated |
|---|---|---|---|
`, benchNodes, benchPools, benchNodes/benchPools, f.total, benchNodes, benchNodes/2, benchRouterInterval,
		benchBudgetInterval, benchBudgetInterval/2, f.lookups, f.pipelines, f.budgetsAfter, f.budgetsBefore, benchNodes, benchNodeRounds)
	row := func(name string, r testing.BenchmarkResult) {
		fmt.Fprintf(&b, "| %s | %s | %d | %s |\n", name, msString(r.NsPerOp()), r.AllocsPerOp(), kibString(r.AllocedBytesPerOp()))
	}
	ratios := func(before, after testing.BenchmarkResult) {
		fmt.Fprintf(&b, "| before / after | %.1f× | %.1f× | %.1f× |\n",
			ratio(before.NsPerOp(), after.NsPerOp()), ratio(before.AllocsPerOp(), after.AllocsPerOp()),
			ratio(before.AllocedBytesPerOp(), after.AllocedBytesPerOp()))
	}
	row("before (scan)", f.before)
	row("after (indexes)", f.after)
	ratios(f.before, f.after)
	b.WriteString("\nOf which the map function alone (the node → requests mapping):\n\n" +
		"| per node event | time | allocations | bytes allocated |\n|---|---|---|---|\n")
	row("before (scan)", f.beforeMap)
	row("after (indexes)", f.afterMap)
	ratios(f.beforeMap, f.afterMap)
	b.WriteString(`
Before, an event costs a copy of every Pipeline plus, per lookup, a match of every node, plus
a list of nodes for every Pipeline with a budget: it grows as nodes × Pipelines. After, it costs
what the Pipelines on that node cost: the map function reads one index bucket per name of the
node and per label it has, and converts only the Pipelines of the buckets of its labels; each
lookup reads one bucket; what remains is, per Pipeline concerned, the copy of it that its pass
reads (in both rows), the list machinery of each lookup, and the nodes its budget counts.
`)
	b.WriteString("\nReproduce with `make bench`, which runs it with the other measurements and keeps this\n" +
		"section when it rewrites the file; alone, with the apiserver and etcd that `make envtest` builds:\n" +
		"`KUBEBUILDER_ASSETS=<envtest directory> BENCH_OUTPUT=$PWD/docs/performance.md go test ./test/bench/operator/ -run 'TestBenchNodeEvents$' -v`.\n")
	b.WriteString(nodeEventsEnd + "\n")
	return b.String()
}

func msString(ns int64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }

func kibString(bytes int64) string { return fmt.Sprintf("%.1f KiB", float64(bytes)/1024) }

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// withSection is doc with its node-events section replaced by section, or with section
// appended when it has none.
func withSection(doc, section string) string {
	return withMarkedSection(doc, section, nodeEventsBegin, nodeEventsEnd)
}

// withMarkedSection is doc with its section between begin and end replaced by section, or with
// section appended when it has none.
func withMarkedSection(doc, section, begin, end string) string {
	b, e := strings.Index(doc, begin), strings.Index(doc, end)
	if b >= 0 && e > b {
		return doc[:b] + section + strings.TrimPrefix(doc[e+len(end):], "\n")
	}
	if doc != "" && !strings.HasSuffix(doc, "\n\n") {
		doc = strings.TrimSuffix(doc, "\n") + "\n\n"
	}
	return doc + section
}

// The sections of a benchmark's document that a rewrite keeps: the node events, written by
// TestBenchNodeEvents, and the reading of the figures, written by hand.
var keptSections = [][2]string{{nodeEventsBegin, nodeEventsEnd}, {readingBegin, readingEnd}}

const (
	readingBegin = "<!-- begin: reading, written by hand; make bench keeps it -->"
	readingEnd   = "<!-- end: reading -->"
)

// keepSections is doc, a new benchmark document, with the kept sections of the file at path.
func keepSections(path, doc string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return doc
	}
	s := string(old)
	for _, m := range keptSections {
		begin, end := strings.Index(s, m[0]), strings.Index(s, m[1])
		if begin >= 0 && end > begin {
			doc = withMarkedSection(doc, s[begin:end+len(m[1])]+"\n", m[0], m[1])
		}
	}
	return doc
}

func TestWithSection(t *testing.T) {
	section := nodeEventsBegin + "\n## Node events\n" + nodeEventsEnd + "\n"
	newer := nodeEventsBegin + "\n## Node events, again\n" + nodeEventsEnd + "\n"
	doc := "# Performance\n\ntext\n"
	withIt := withSection(doc, section)
	if want := doc + "\n" + section; withIt != want {
		t.Fatalf("appended:\n%q\nwant\n%q", withIt, want)
	}
	if got := withSection(withIt+"after\n", newer); got != doc+"\n"+newer+"after\n" {
		t.Errorf("replaced:\n%q", got)
	}
	path := t.TempDir() + "/performance.md"
	if err := os.WriteFile(path, []byte(withIt), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := keepSections(path, "# Performance\n\nnew text\n"); got != "# Performance\n\nnew text\n\n"+section {
		t.Errorf("kept:\n%q", got)
	}
	reading := readingBegin + "\n## Reading\n" + readingEnd + "\n"
	if err := os.WriteFile(path, []byte(reading+withIt), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := keepSections(path, "# Performance\n\nnew text\n"); got != "# Performance\n\nnew text\n\n"+section+"\n"+reading {
		t.Errorf("kept both:\n%q", got)
	}
	if got := keepSections(path+".missing", doc); got != doc {
		t.Errorf("without a file:\n%q", got)
	}
}
