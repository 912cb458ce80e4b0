// Command bench-router measures the pipeline router (make bench-router): the latency it adds
// per step against a caller that calls the same steps itself, one after the other, and its
// throughput at several numbers of concurrent callers, side by side in the same run with
// KServe's InferenceGraph router driving the same steps as a Sequence graph, and with the
// router built from another revision when -before names it. It writes its figures as Markdown.
//
// Everything runs on loopback addresses; KServe's router listens on its fixed port 8080, so
// make bench-router runs this program in a network namespace of its own when it can.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

type options struct {
	router, kserve, kserveVersion, kserveError, out string
	before, beforeLabel                             string
	steps, body, rounds                             int
	duration, warmup                                time.Duration
	concurrency                                     []int
	slow                                            slowCallers
	slowDuration                                    time.Duration
	profileSeconds                                  int
}

func main() {
	var o options
	var conc string
	flag.StringVar(&o.router, "router", "bin/router", "The pipeline router binary.")
	flag.StringVar(&o.kserve, "kserve", "", "KServe's router binary (empty: the direct chain only).")
	flag.StringVar(&o.kserveVersion, "kserve-version", "", "The version KServe's router was built from.")
	flag.StringVar(&o.kserveError, "kserve-error", "", "Why KServe's router is missing, when it is.")
	flag.StringVar(&o.before, "before", "", "The pipeline router binary built from another revision, measured beside (empty: none).")
	flag.StringVar(&o.beforeLabel, "before-label", "", "The revision -before was built from, as the report names it.")
	flag.StringVar(&o.out, "out", "docs/performance-router.md", "Where the Markdown report goes.")
	flag.IntVar(&o.steps, "steps", 3, "Steps in the pipeline.")
	flag.IntVar(&o.body, "body", 1024, "Bytes of the JSON request body.")
	flag.IntVar(&o.rounds, "rounds", 5, "Rounds; every round measures every variant at every concurrency, interleaved.")
	flag.DurationVar(&o.duration, "duration", time.Second, "Measured time of one variant at one concurrency in one round.")
	flag.DurationVar(&o.warmup, "warmup", 300*time.Millisecond, "Unmeasured time before each measurement.")
	flag.StringVar(&conc, "concurrency", "1,16,64", "Numbers of concurrent callers; the first is used for the overhead per hop.")
	flag.IntVar(&o.profileSeconds, "profile-seconds", 5, "Seconds of CPU profile of the router under the most callers (0: none).")
	flag.IntVar(&o.slow.clients, "slow-callers", 64, "Callers that send their bodies slowly (0: no slow-caller measurement).")
	flag.IntVar(&o.slow.size, "slow-size", 1<<20, "Bytes of a slow caller's body.")
	flag.IntVar(&o.slow.rate, "slow-rate", 64<<10, "Bytes per second a slow caller sends.")
	flag.IntVar(&o.slow.callers, "slow-normal-callers", 8, "Normal callers measured with and without the slow callers.")
	flag.DurationVar(&o.slowDuration, "slow-duration", 5*time.Second, "Longest measurement of the normal callers, with and without the slow callers.")
	serve := flag.Int("serve-steps", 0, "Serve this many steps and print their URLs, until standard input closes (the steps' process).")
	flag.Parse()
	if *serve > 0 {
		if err := serveSteps(*serve); err != nil {
			fmt.Fprintln(os.Stderr, "bench-router: steps:", err)
			os.Exit(1)
		}
		return
	}
	for _, f := range strings.Split(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench-router: bad -concurrency %q\n", conc)
			os.Exit(2)
		}
		o.concurrency = append(o.concurrency, n)
	}
	if err := bench(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-router:", err)
		os.Exit(1)
	}
}

func bench(ctx context.Context, o options) error {
	steps, err := startStepsProcess(ctx, o.steps)
	if err != nil {
		return err
	}
	defer steps.stop()
	env := newEnvironment()
	body := requestBody(o.body)

	variants := []*variant{{name: "direct chain", call: directChain(steps.urls)}}
	ours, err := startRouter(ctx, o.router, steps.urls, "")
	if err != nil {
		return err
	}
	defer ours.stop()
	variants = append(variants, &variant{name: "pipeline router", hops: true, pid: ours.cmd.Process.Pid, call: viaRouter(ours.url)})
	cel, err := startRouter(ctx, o.router, steps.urls, benchStopWhen)
	if err != nil {
		return err
	}
	defer cel.stop()
	variants = append(variants, &variant{name: "pipeline router, stopWhen on every step", hops: true, pid: cel.cmd.Process.Pid, call: viaRouter(cel.url)})
	if o.kserve != "" {
		ks, err := startKServe(ctx, o.kserve, steps.urls)
		if err != nil {
			return fmt.Errorf("KServe's router: %w", err)
		}
		defer ks.stop()
		variants = append(variants, &variant{name: "KServe router " + o.kserveVersion, hops: true, kserve: true, pid: ks.cmd.Process.Pid, call: viaRouter(ks.url)})
	}
	if o.before != "" {
		old, err := startRouter(ctx, o.before, steps.urls, "")
		if err != nil {
			return fmt.Errorf("the router from before: %w", err)
		}
		defer old.stop()
		variants = append(variants, &variant{name: beforeName(o.beforeLabel), hops: true, before: true, pid: old.cmd.Process.Pid,
			call: viaRouter(old.url), unknownFlags: old.unknownFlags})
	}
	for _, v := range variants {
		if err := v.check(ctx, body); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
	}

	start := time.Now()
	measureRounds(ctx, o, variants, body)
	// One profile at the fewest callers, where the router waits on every exchange, and one at
	// the most, where it is busy.
	var profs []*profile
	if o.profileSeconds > 0 {
		for _, c := range slices.Compact([]int{slices.Min(o.concurrency), slices.Max(o.concurrency)}) {
			profs = append(profs, profileRouter(ctx, ours, o.router, variants[1], body, c, o.profileSeconds))
		}
	}
	var slow *slowCallers
	if o.slow.clients > 0 {
		slow = &o.slow
		measureSlowCallers(ctx, ours, variants[1], body, slow, o.slowDuration)
	}
	rep := report{options: o, env: env, variants: variants, slow: slow, profiles: profs}
	procs, err := measureOneCaller(ctx, o, steps, &rep)
	for _, p := range procs {
		defer p.stop()
	}
	if err != nil {
		return err
	}
	env.finish(time.Since(start))
	if err := os.WriteFile(o.out, []byte(rep.markdown()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, ">> wrote %s\n", o.out)
	errs := []error{failures(variants)}
	for _, v := range rep.mapping.variants {
		errs = append(errs, v.failed(v.name))
	}
	for _, v := range rep.graph.variants {
		errs = append(errs, v.failed(v.name))
	}
	for _, v := range rep.grpc.variants {
		errs = append(errs, v.failed(v.name))
	}
	return errors.Join(errs...)
}

// measureOneCaller measures, into rep, what one caller sees of tensor mapping, of a graph of
// steps and of gRPC, and what reading an answer for stopWhen costs; it returns the routers it
// started.
func measureOneCaller(ctx context.Context, o options, steps *stepsProcess, rep *report) ([]*process, error) {
	stepURLs := steps.urls
	mapping, procs, err := measureMapping(ctx, o, stepURLs)
	if err != nil {
		return procs, fmt.Errorf("tensor mapping: %w", err)
	}
	graph, gprocs, err := measureGraph(ctx, o, stepURLs)
	procs = append(procs, gprocs...)
	if err != nil {
		return procs, fmt.Errorf("graph: %w", err)
	}
	grpcb, gprocs, err := measureGRPC(ctx, o, steps)
	procs = append(procs, gprocs...)
	if err != nil {
		return procs, fmt.Errorf("gRPC: %w", err)
	}
	reading, err := measureJSONReading([]int{o.body, 64 << 10, 1 << 20})
	if err != nil {
		return procs, fmt.Errorf("reading answers for stopWhen: %w", err)
	}
	rep.mapping, rep.graph, rep.grpc, rep.reading = mapping, graph, grpcb, reading
	return procs, nil
}

// measureRounds measures every variant at every concurrency, o.rounds times.
func measureRounds(ctx context.Context, o options, variants []*variant, body []byte) {
	for round := range o.rounds {
		for _, c := range o.concurrency {
			// The order turns from round to round, so that no variant always comes right after
			// another router: with a stopWhen that reads nothing of the answers (status == 0),
			// the second router measured 4 % slower than the first at 16 callers. The router from
			// before (last) and the pipeline router (second) trade places every other round, so
			// that each comes after the same variants as often as the other.
			order := variants
			if o.before != "" && round%2 == 1 {
				order = slices.Clone(variants)
				order[1], order[len(order)-1] = order[len(order)-1], order[1]
			}
			for k := range order {
				v := order[(k+round)%len(order)]
				fmt.Fprintf(os.Stderr, ">> round %d/%d, %d callers: %s\n", round+1, o.rounds, c, v.name)
				v.measure(ctx, c, body, o.warmup, o.duration)
			}
		}
	}
}

// beforeName is the name of the variant of the router from before.
func beforeName(label string) string {
	if label == "" {
		return "pipeline router before"
	}
	return "pipeline router before (" + label + ")"
}

// failures says which variant had calls fail, if any.
func failures(variants []*variant) error {
	for _, v := range variants {
		if v.failures() > 0 {
			return errors.New(v.name + ": some calls failed (see the report)")
		}
	}
	return nil
}
