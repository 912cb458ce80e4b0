package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// environment is the machine the benchmark ran on, and how busy it was.
type environment struct {
	host, start, loadStart, loadEnd string
	took                            time.Duration
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func newEnvironment() *environment {
	host, _ := os.Hostname()
	return &environment{host: host, start: time.Now().UTC().Format("2006-01-02 15:04 UTC"), loadStart: loadAverage()}
}

func (e *environment) finish(took time.Duration) { e.took, e.loadEnd = took, loadAverage() }

type report struct {
	options
	env      *environment
	variants []*variant
	slow     *slowCallers
	profiles []*profile
	mapping  *mappingBench
	graph    *graphBench
	grpc     *grpcBench
	reading  *jsonReading
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func (r report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Router performance\n\nMeasured by `make bench-router` on %s (%s/%s, %d CPUs, %s), %s, in %s.\n"+
		"Load average of the machine (1, 5, 15 min) at the start: %s; at the end: %s.\n\n",
		r.env.host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), r.env.start,
		r.env.took.Round(time.Second), r.env.loadStart, r.env.loadEnd)
	fmt.Fprintf(&b, `The pipeline: %d steps, each an HTTP server on a loopback address that answers the JSON body it
is sent (no model time, so everything measured is transport and routing), all in one process of
their own, apart from the callers', as the pods they stand for. The request: a JSON document of
%d bytes. The callers, the steps and the routers share the machine's CPUs.

- **direct chain**: the caller calls the steps itself, one after the other, each with the
  previous step's response: the floor.
- **pipeline router**: `+"`bin/router`"+` built from this tree, no stopWhen.
- **pipeline router, stopWhen on every step**: the same, with `+"`%s`"+`
  (never true) on every step, so every response is read and evaluated.
`, r.steps, len(requestBody(r.body)), benchStopWhen)
	if r.kserve != "" {
		fmt.Fprintf(&b, "- **KServe router**: KServe's InferenceGraph router (`github.com/kserve/kserve` %s `cmd/router`, built\n"+
			"  from the Go module proxy by `hack/build-tool.sh kserve`) running the same steps as a Sequence\n"+
			"  graph (`\"data\": \"$response\"`). It logs several lines per request at info level and has no\n"+
			"  option to turn that off; its log goes to /dev/null.\n", r.kserveVersion)
	} else {
		fmt.Fprintf(&b, "- **KServe router**: not measured: %s\n", r.kserveError)
	}
	if v := r.beforeVariant(); v != nil {
		from := "another revision"
		if r.beforeLabel != "" {
			from = r.beforeLabel
		}
		fmt.Fprintf(&b, "- **%s**: the router built from %s, run as the pipeline router is: the same\n"+
			"  configuration, no stopWhen, the same flags", v.name, from)
		if len(v.unknownFlags) > 0 {
			fmt.Fprintf(&b, " except `%s`, which it does not define", strings.Join(v.unknownFlags, "`, `"))
		}
		b.WriteString(".\n")
	}
	fmt.Fprintf(&b, "\nEvery round measures every variant at every concurrency for %s (after %s of warm-up),\n"+
		"interleaved, in an order that turns from round to round, so that a burst of other work on the machine\n"+
		"touches every variant alike and none always runs right after another; %d rounds.\n"+
		"Latencies are pooled over the rounds; throughput is the median round (the slowest and fastest\n"+
		"rounds in parentheses).\n",
		r.duration, r.warmup, r.rounds)
	if r.beforeVariant() != nil {
		b.WriteString("The pipeline router and the router from before swap places in that order every other round, so that\n" +
			"each runs after the same variants as often as the other.\n")
	}

	r.overhead(&b)
	r.throughput(&b)
	r.latency(&b)
	r.cpu(&b)
	if len(r.profiles) > 0 {
		b.WriteString("\n## Where the router's CPU goes\n\nCPU profiles of the pipeline router (no stopWhen), taken from its `/debug/pprof/` " +
			"(`--profiling`): the top entries of `go tool pprof -top`. The callers, the steps and the router share the machine, " +
			"so the router's share of the samples is below 100 %.\n")
		for _, p := range r.profiles {
			b.WriteString(p.markdown())
		}
	}
	if r.slow != nil {
		b.WriteString(r.slow.markdown())
	}
	if r.graph != nil {
		b.WriteString(r.graph.markdown())
	}
	if r.mapping != nil {
		b.WriteString(r.mapping.markdown())
	}
	if r.grpc != nil {
		b.WriteString(r.grpc.markdown())
	}
	if r.reading != nil {
		b.WriteString(r.reading.markdown())
	}
	b.WriteString("\nReproduce with `make bench-router` (options: `BENCH_ROUTER_ARGS='-rounds 5 -duration 3s'`).\n")
	return b.String()
}

func (r report) overhead(b *strings.Builder) {
	one := r.concurrency[0]
	direct := r.variants[0].cells[one]
	fmt.Fprintf(b, "\n## Overhead per hop\n\nOne caller at a time (concurrency %d). The overhead per hop is the latency a variant adds\n"+
		"to the direct chain, divided by the %d steps it calls: (p50 − p50 of the direct chain) / %d, and the\n"+
		"same for p99. Goal: at most 0.08 ms at p50.\n\n", one, r.steps, r.steps)
	b.WriteString("| variant | p50 | p99 | overhead per hop, p50 | overhead per hop, p99 | goal (≤ 0.08 ms p50) |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(b, "| %s | %s | %s | | | |\n", r.variants[0].name, ms(direct.percentile(0.5)), ms(direct.percentile(0.99)))
	for _, v := range r.variants[1:] {
		c := v.cells[one]
		p50 := (c.percentile(0.5) - direct.percentile(0.5)) / time.Duration(r.steps)
		p99 := (c.percentile(0.99) - direct.percentile(0.99)) / time.Duration(r.steps)
		goal := verdict(p50 <= 80*time.Microsecond)
		if v.kserve {
			goal = "(not ours)"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", v.name, ms(c.percentile(0.5)), ms(c.percentile(0.99)), ms(p50), ms(p99), goal)
	}
}

func (r report) kserveVariant() *variant {
	for _, v := range r.variants {
		if v.kserve {
			return v
		}
	}
	return nil
}

func (r report) beforeVariant() *variant {
	for _, v := range r.variants {
		if v.before {
			return v
		}
	}
	return nil
}

func (r report) throughput(b *strings.Builder) {
	ks, old := r.kserveVariant(), r.beforeVariant()
	b.WriteString("\n## Throughput\n\nRequests per second through the whole pipeline (median of the rounds), and ratios of\n" +
		"figures measured in the same run. Goals: the pipeline router at least 0.6 × the direct chain at the most callers\n" +
		"(it makes one more HTTP exchange per request than the chain, so about 0.75 is its CPU-bound ceiling), at least\n" +
		"1.5 × KServe's router at every concurrency, and stopWhen on every step at most 10 % slower than without.\n" +
		"A ratio is that of the medians; in parentheses, the lowest and the highest ratio of the two measured in\n" +
		"one round, which shows how much the machine's noise moves it.\n")
	if old != nil {
		b.WriteString("router / before is the pipeline router against the router from before, with no goal.\n")
	}
	b.WriteString("\n| callers |")
	for _, v := range r.variants {
		b.WriteString(" " + v.name + " |")
	}
	b.WriteString(" router / direct | stopWhen / router |")
	if ks != nil {
		b.WriteString(" router / KServe |")
	}
	if old != nil {
		b.WriteString(" router / before |")
	}
	b.WriteString(" goals |\n|---|" + strings.Repeat("---|", len(r.variants)) + "---|---|")
	if ks != nil {
		b.WriteString("---|")
	}
	if old != nil {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")
	most := slices.Max(r.concurrency)
	for _, c := range r.concurrency {
		fmt.Fprintf(b, "| %d |", c)
		for _, v := range r.variants {
			lo, hi := v.cells[c].spread()
			fmt.Fprintf(b, " %.0f/s (%.0f–%.0f) |", v.cells[c].throughput(), lo, hi)
		}
		plainCell, celCell := r.variants[1].cells[c], r.variants[2].cells[c]
		plain := plainCell.throughput()
		direct, cel := plain/r.variants[0].cells[c].throughput(), celCell.throughput()/plain
		met := cel >= 0.9 && (c != most || direct >= 0.6)
		fmt.Fprintf(b, " %s | %s |", ratio(direct, plainCell, r.variants[0].cells[c]), ratio(cel, celCell, plainCell))
		if ks != nil {
			k := plain / ks.cells[c].throughput()
			met = met && k >= 1.5
			fmt.Fprintf(b, " %s |", ratio(k, plainCell, ks.cells[c]))
		}
		if old != nil {
			fmt.Fprintf(b, " %s |", ratio(plain/old.cells[c].throughput(), plainCell, old.cells[c]))
		}
		fmt.Fprintf(b, " %s |\n", verdict(met))
	}
	for _, v := range r.variants {
		if n := v.failures(); n > 0 {
			var first error
			for _, c := range v.cells {
				if c.firstError != nil {
					first = c.firstError
				}
			}
			fmt.Fprintf(b, "\n%s: %d calls failed; the first: %v\n", v.name, n, first)
		}
	}
}

// ratio is r, the ratio of a's median throughput to b's, with the lowest and highest ratio of
// the two in one round.
func ratio(r float64, a, b *cell) string {
	lo, hi := roundRatios(a, b)
	return fmt.Sprintf("%.2f (%.2f–%.2f)", r, lo, hi)
}

// cpu is the routers' CPU time per request: what a router costs, whatever else the machine
// does at the time.
func (r report) cpu(b *strings.Builder) {
	b.WriteString("\n## CPU per request\n\nThe router process's CPU time (user and system, from /proc, in ticks of 10 ms) over the\n" +
		"measured calls, divided by their number: what one request costs the router. Unlike throughput\n" +
		"and latency it hardly depends on what else the machine runs.\n\n| callers |")
	var routers []*variant
	for _, v := range r.variants {
		if v.pid != 0 {
			routers = append(routers, v)
			b.WriteString(" " + v.name + " |")
		}
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(routers)) + "\n")
	for _, c := range r.concurrency {
		fmt.Fprintf(b, "| %d |", c)
		for _, v := range routers {
			fmt.Fprintf(b, " %.1f µs |", float64(v.cells[c].cpuPerCall())/float64(time.Microsecond))
		}
		b.WriteString("\n")
	}
}

func (r report) latency(b *strings.Builder) {
	b.WriteString("\n## Latency under load\n\np50 / p99 of a whole request through the pipeline.\n\n| callers |")
	for _, v := range r.variants {
		b.WriteString(" " + v.name + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(r.variants)) + "\n")
	for _, c := range r.concurrency {
		fmt.Fprintf(b, "| %d |", c)
		for _, v := range r.variants {
			fmt.Fprintf(b, " %s / %s |", ms(v.cells[c].percentile(0.5)), ms(v.cells[c].percentile(0.99)))
		}
		b.WriteString("\n")
	}
}
