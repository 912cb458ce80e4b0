package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
)

// modelPath is where every step serves its Open Inference Protocol model, "echo": one FP32
// input x of any length, and one output x.
const modelPath = "/v2/models/echo"

// tensorElements is the size of the measured tensor: 1 MiB of FP32.
const tensorElements = 1 << 18

// modelMetadata answers the metadata of a model whose inputs and outputs are tensors, each
// FP32 of shape [1, -1].
func modelMetadata(name string, tensors ...string) http.HandlerFunc {
	var list []string
	for _, t := range tensors {
		list = append(list, fmt.Sprintf(`{"name":%q,"datatype":"FP32","shape":[1,-1]}`, t))
	}
	doc := fmt.Sprintf(`{"name":%q,"platform":"bench","inputs":[%[2]s],"outputs":[%[2]s]}`, name, strings.Join(list, ","))
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, doc)
	}
}

// tensorEcho answers the request it is sent as the answer of a model whose outputs are its
// inputs: the same body with the "inputs" at its start named "outputs" (the JSON header grows
// by one byte), or the body as it is when it is an answer already, and no model time. It copies
// nothing and reads only the start of the body, alike for every variant.
func tensorEcho(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := []byte(`"inputs"`)
	i := bytes.Index(b[:min(len(b), 64)], key)
	grown := 0
	if i >= 0 {
		grown = 1
	}
	if h := r.Header.Get(oip.HeaderInferenceHeaderLength); h != "" {
		n, _ := strconv.Atoi(h)
		w.Header().Set(oip.HeaderInferenceHeaderLength, strconv.Itoa(n+grown))
	}
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+grown))
	if i < 0 {
		_, _ = w.Write(b)
		return
	}
	_, _ = w.Write(b[:i])
	_, _ = io.WriteString(w, `"outputs"`)
	_, _ = w.Write(b[i+len(key):])
}

// mappingBench is the cost of mapping tensors: two steps of model echo, the second given the
// first's answer as it is (raw) or a request the router makes of the first's output x (mapped),
// the first given the caller's request as it is or a request made of its input x; with the
// tensor as JSON numbers and under the binary data extension.
type mappingBench struct {
	variants []*mappingVariant
	rounds   int
	duration time.Duration
}

type mappingVariant struct {
	name         string
	mapped, bin  bool
	url          string
	body         []byte
	headerLength int
	series
}

// series is one caller's calls: their latencies, and the calls that failed.
type series struct {
	latencies  []time.Duration
	failures   int
	firstError error
}

func mappingRequest(bin bool) ([]byte, int) {
	head := fmt.Sprintf(`{"inputs":[{"name":"x","shape":[1,%d],"datatype":"FP32"`, tensorElements)
	if bin {
		head += fmt.Sprintf(`,"parameters":{"binary_data_size":%d}}]}`, 4*tensorElements)
		data := make([]byte, 0, 4*tensorElements)
		for i := range tensorElements {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(i%1000)/8))
		}
		return append([]byte(head), data...), len(head)
	}
	var b strings.Builder
	b.WriteString(head + `,"data":[`)
	for i := range tensorElements {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(i%1000)/8, 'g', -1, 32))
	}
	b.WriteString(`]}]}`)
	return []byte(b.String()), -1
}

func measureMapping(ctx context.Context, o options, stepURLs []string) (*mappingBench, []*process, error) {
	bases := make([]string, 2)
	for i := range bases {
		bases[i] = strings.TrimSuffix(stepURLs[i], "/infer") + modelPath
	}
	mb := &mappingBench{rounds: o.rounds, duration: o.duration}
	var procs []*process
	for _, bin := range []bool{false, true} {
		for _, mapped := range []bool{false, true} {
			cfg := routerconfig.Config{Pipeline: "bench/mapping", MaxBodyBytes: 16 << 20}
			for i, base := range bases {
				s := routerconfig.Step{Name: "echo-" + strconv.Itoa(i+1), URL: base + "/infer", TimeoutSeconds: 30,
					Protocol: routerconfig.ProtocolOpenInference, MetadataURL: base}
				if mapped {
					s.Inputs = []routerconfig.TensorInput{{Name: "x", Tensor: "x"}}
					if i > 0 {
						s.Inputs[0].Step = "echo-1"
					}
				}
				cfg.Steps = append(cfg.Steps, s)
			}
			p, err := startRouterConfig(ctx, o.router, cfg)
			if err != nil {
				return nil, procs, err
			}
			procs = append(procs, p)
			v := &mappingVariant{mapped: mapped, bin: bin, url: p.url}
			v.body, v.headerLength = mappingRequest(bin)
			v.name = map[bool]string{false: "raw forwarding", true: "mapped"}[mapped] + ", " + map[bool]string{false: "JSON", true: "binary"}[bin]
			mb.variants = append(mb.variants, v)
		}
	}
	for _, v := range mb.variants {
		// The mapped router is ready once it has read the models' metadata.
		if err := waitReady(ctx, procs[slices.Index(mb.variants, v)]); err != nil {
			return nil, procs, fmt.Errorf("%s: %w", v.name, err)
		}
		if _, err := v.call(ctx); err != nil {
			return nil, procs, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	interleave(mb.rounds, "tensor mapping", mb.variants, func(v *mappingVariant) string { return v.name }, func(v *mappingVariant) {
		v.measure(ctx, o.warmup, o.duration, func(ctx context.Context) error {
			_, err := v.call(ctx)
			return err
		})
	})
	return mb, procs, nil
}

func waitReady(ctx context.Context, p *process) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.adminURL+"/readyz", http.NoBody)
		if res, err := client.Do(req); err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
	return fmt.Errorf("not ready within 30 s")
}

// call sends the variant's request once and checks that the answer has the tensor back.
func (v *mappingVariant) call(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.url, bytes.NewReader(v.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if v.headerLength >= 0 {
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set(oip.HeaderInferenceHeaderLength, strconv.Itoa(v.headerLength))
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err
	}
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("answered %s: %.200s", res.Status, b)
	}
	length, err := oip.ParseHeaderLength(res.Header.Get(oip.HeaderInferenceHeaderLength))
	if err != nil {
		return 0, err
	}
	doc, bin, err := oip.Split(b, length)
	if err != nil {
		return 0, err
	}
	outputs, err := oip.ParseResponse(doc, int64(len(bin)))
	if err != nil {
		return 0, err
	}
	if len(outputs) != 1 || outputs[0].Name != "x" || oip.Elements(outputs[0].Shape) != tensorElements || outputs[0].Binary != v.bin {
		return 0, fmt.Errorf("answered %d outputs, not the tensor x back", len(outputs))
	}
	return len(b), nil
}

// interleave measures each of variants in each of rounds (what names the measurement in the
// progress lines), each round starting one variant later than the one before: no variant is
// always first, or always right after another.
func interleave[V any](rounds int, what string, variants []V, name func(V) string, measure func(V)) {
	for round := range rounds {
		for k := range variants {
			v := variants[(k+round)%len(variants)]
			fmt.Fprintf(os.Stderr, ">> round %d/%d, %s: %s\n", round+1, rounds, what, name(v))
			measure(v)
		}
	}
}

// measure calls call for warmup, then for d, and records the calls of d.
func (s *series) measure(ctx context.Context, warmup, d time.Duration, call func(context.Context) error) {
	for _, span := range []struct {
		d    time.Duration
		keep bool
	}{{warmup, false}, {d, true}} {
		for end := time.Now().Add(span.d); time.Now().Before(end); {
			start := time.Now()
			err := call(ctx)
			switch {
			case err != nil && span.keep:
				s.failures++
				if s.firstError == nil {
					s.firstError = err
				}
			case span.keep:
				s.latencies = append(s.latencies, time.Since(start))
			}
		}
	}
}

// failed says, naming the series, that some of its calls failed; nil when none did.
func (s *series) failed(name string) error {
	if s.failures == 0 {
		return nil
	}
	return errors.New(name + ": some calls failed (see the report)")
}

func (s *series) median() time.Duration {
	if len(s.latencies) == 0 {
		return 0
	}
	l := slices.Clone(s.latencies)
	slices.Sort(l)
	return l[len(l)/2]
}

// mappingGoal is the most mapping may add to raw forwarding for 1 MiB of binary tensors.
const mappingGoal = 1.10

func (mb *mappingBench) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Tensor mapping\n\nTwo steps of an Open Inference Protocol model that answers its input as its output, x, "+
		"an FP32 tensor of %d elements (1 MiB as binary data, %s as JSON numbers), one caller. **Raw forwarding**: "+
		"each step gets the body before it as it is. **Mapped**: the router reads the tensor from the caller's request "+
		"and from the first step's answer and makes each step's request of it (`inputs`, see docs/router.md). "+
		"%d rounds of %s per variant, interleaved; medians of every call.\n\n",
		tensorElements, mib(int64(len(mustRequest(false)))), mb.rounds, mb.duration)
	b.WriteString("| variant | calls | median latency | added per mapped hop | mapped / raw | goal |\n|---|---|---|---|---|---|\n")
	raw := map[bool]time.Duration{}
	for _, v := range mb.variants {
		if !v.mapped {
			raw[v.bin] = v.median()
		}
	}
	for _, v := range mb.variants {
		added, ratio, goal := "", "", ""
		if v.mapped && raw[v.bin] > 0 {
			// Both hops are mapped: the caller's request to the first step, its answer to the second.
			added = ms((v.median() - raw[v.bin]) / 2)
			r := float64(v.median()) / float64(raw[v.bin])
			ratio = fmt.Sprintf("%.2f", r)
			if v.bin {
				goal = fmt.Sprintf("≤ %.2f: %s", mappingGoal, verdict(r <= mappingGoal))
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", v.name, len(v.latencies), ms(v.median()), added, ratio, goal)
		if v.failures > 0 {
			fmt.Fprintf(&b, "\n%s: %d calls failed, the first with: %v\n\n", v.name, v.failures, v.firstError)
		}
	}
	b.WriteString("\nUnder the binary data extension the router reads the JSON header of each body and copies the tensor's " +
		"bytes from one body to the next. With JSON tensors it reads every number of the document with `encoding/json` " +
		"(which checks it whole, then decodes it, keeping `data` as text): large tensors belong in binary data.\n")
	return b.String()
}

func mustRequest(bin bool) []byte {
	b, _ := mappingRequest(bin)
	return b
}
