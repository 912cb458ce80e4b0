package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
)

const (
	// slowModelPath serves the model slow: echo's answer after modelTime.
	slowModelPath = "/v2/models/slow"
	// pairModelPath serves the model pair: inputs a and b, answered as outputs a and b.
	pairModelPath = "/v2/models/pair"
	// modelTime is what the model slow takes to answer.
	modelTime = 50 * time.Millisecond
	// graphGoal is the most the diamond may take, as a share of the same steps in sequence:
	// the time of one branch and the router's overhead, not of both branches.
	graphGoal = 0.60
)

// graphRequest is the pipeline's request of the graph measurement: a small tensor x.
const graphRequest = `{"inputs":[{"name":"x","shape":[1,8],"datatype":"FP32","data":[1,2,3,4,5,6,7,8]}]}`

// graphBench is a diamond against the same steps in sequence: request → first (echo) → left
// and right (slow, each from first's x) → join (pair, a from left and b from right). In
// sequence, right takes left's x instead, so that it waits for left.
type graphBench struct {
	variants []*graphVariant
	rounds   int
	duration time.Duration
}

type graphVariant struct {
	name string
	url  string
	series
}

func graphConfig(stepURLs []string, sequence bool) routerconfig.Config {
	step := func(name string, i int, model string, inputs ...routerconfig.TensorInput) routerconfig.Step {
		base := strings.TrimSuffix(stepURLs[i%len(stepURLs)], "/infer") + model
		return routerconfig.Step{Name: name, URL: base + "/infer", TimeoutSeconds: 30,
			Protocol: routerconfig.ProtocolOpenInference, MetadataURL: base, Inputs: inputs}
	}
	rightFrom := "first"
	if sequence {
		rightFrom = "left"
	}
	return routerconfig.Config{Pipeline: "bench/graph", Steps: []routerconfig.Step{
		step("first", 0, modelPath, routerconfig.TensorInput{Name: "x", Tensor: "x"}),
		step("left", 1, slowModelPath, routerconfig.TensorInput{Name: "x", Step: "first", Tensor: "x"}),
		step("right", 2, slowModelPath, routerconfig.TensorInput{Name: "x", Step: rightFrom, Tensor: "x"}),
		step("join", 0, pairModelPath, routerconfig.TensorInput{Name: "a", Step: "left", Tensor: "x"},
			routerconfig.TensorInput{Name: "b", Step: "right", Tensor: "x"}),
	}}
}

func measureGraph(ctx context.Context, o options, stepURLs []string) (*graphBench, []*process, error) {
	gb := &graphBench{rounds: o.rounds, duration: o.duration}
	var procs []*process
	for _, sequence := range []bool{false, true} {
		p, err := startRouterConfig(ctx, o.router, graphConfig(stepURLs, sequence))
		if err != nil {
			return nil, procs, err
		}
		procs = append(procs, p)
		v := &graphVariant{name: map[bool]string{false: "diamond", true: "the same steps in sequence"}[sequence], url: p.url}
		gb.variants = append(gb.variants, v)
		if err := waitReady(ctx, p); err != nil {
			return nil, procs, fmt.Errorf("%s: %w", v.name, err)
		}
		if err := v.call(ctx); err != nil {
			return nil, procs, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	interleave(gb.rounds, "graph", gb.variants, func(v *graphVariant) string { return v.name }, func(v *graphVariant) {
		v.measure(ctx, o.warmup, o.duration, v.call)
	})
	return gb, procs, nil
}

// call sends the graph's request once and checks that the answer is join's: a and b.
func (v *graphVariant) call(ctx context.Context) error {
	b, err := post(ctx, v.url, []byte(graphRequest))
	if err != nil {
		return err
	}
	outputs, err := oip.ParseResponse(b, 0)
	if err != nil {
		return err
	}
	if len(outputs) != 2 || outputs[0].Name != "a" || outputs[1].Name != "b" {
		return fmt.Errorf("answered %.200s, not join's a and b", b)
	}
	return nil
}

func (gb *graphBench) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Graphs\n\nA diamond of Open Inference Protocol steps: the request → first (no model time) → left and "+
		"right, each taking first's tensor and answering after %s → join, taking both. **In sequence**, right takes "+
		"left's tensor instead, so that it waits for left. A tensor of 8 FP32 numbers, one caller, %d rounds of %s "+
		"per variant, interleaved; medians of every call.\n\n", modelTime, gb.rounds, gb.duration)
	b.WriteString("| variant | calls | median latency | beyond the model time of one branch | diamond / sequence | goal |\n|---|---|---|---|---|---|\n")
	diamond, sequence := gb.variants[0], gb.variants[1]
	for _, v := range gb.variants {
		ratio, goal := "", ""
		if v == diamond && sequence.median() > 0 {
			r := float64(diamond.median()) / float64(sequence.median())
			ratio, goal = fmt.Sprintf("%.2f", r), fmt.Sprintf("≤ %.2f: %s", graphGoal, verdict(r <= graphGoal))
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", v.name, len(v.latencies), ms(v.median()), ms(v.median()-modelTime), ratio, goal)
		if v.failures > 0 {
			fmt.Fprintf(&b, "\n%s: %d calls failed, the first with: %v\n\n", v.name, v.failures, v.firstError)
		}
	}
	return b.String()
}
