package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"
)

// client is the callers' client, the same for every variant: keep-alive connections enough for
// every caller.
var client = &http.Client{Transport: &http.Transport{
	MaxIdleConns:        1024,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     90 * time.Second,
	DisableCompression:  true,
}}

// variant is one way of running the pipeline, and what was measured of it.
type variant struct {
	name   string
	hops   bool // through a router: its overhead per hop is reported
	kserve bool
	before bool // the router from another revision (-before)
	// unknownFlags are the benchmark's optional flags the router does not define.
	unknownFlags []string
	call         func(ctx context.Context, body []byte) ([]byte, error)
	cells        map[int]*cell // by concurrency
	// pid is the router's process, whose CPU time is measured (0: none, the direct chain).
	pid int
}

// cell is one variant at one concurrency, over every round.
type cell struct {
	latencies   []time.Duration
	throughputs []float64 // requests per second, one per round
	failures    int
	firstError  error
	// cpu is the router's CPU time (user and system) during the measured calls, and calls
	// their number.
	cpu   time.Duration
	calls int
}

func post(ctx context.Context, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s: %.200s", url, res.Status, b)
	}
	return b, nil
}

// directChain calls the steps one after the other, each with the previous step's response.
func directChain(urls []string) func(context.Context, []byte) ([]byte, error) {
	return func(ctx context.Context, body []byte) ([]byte, error) {
		var err error
		for _, u := range urls {
			if body, err = post(ctx, u, body); err != nil {
				return nil, err
			}
		}
		return body, nil
	}
}

func viaRouter(url string) func(context.Context, []byte) ([]byte, error) {
	return func(ctx context.Context, body []byte) ([]byte, error) { return post(ctx, url, body) }
}

// check makes sure the variant answers what the chain of echo steps answers.
func (v *variant) check(ctx context.Context, body []byte) error {
	got, err := v.call(ctx, body)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, body) {
		return fmt.Errorf("answered %.100q, want the body back", got)
	}
	return nil
}

// measure runs callers concurrent callers for warmup, then for d, and records the calls of d.
func (v *variant) measure(ctx context.Context, callers int, body []byte, warmup, d time.Duration) {
	if v.cells == nil {
		v.cells = map[int]*cell{}
	}
	c := v.cells[callers]
	if c == nil {
		c = &cell{}
		v.cells[callers] = c
	}
	v.run(ctx, callers, body, warmup, nil)
	cpu := cpuTime(v.pid)
	start := time.Now()
	n := v.run(ctx, callers, body, d, c)
	c.throughputs = append(c.throughputs, float64(n)/time.Since(start).Seconds())
	c.cpu += cpuTime(v.pid) - cpu
	c.calls += n
}

// cpuPerCall is the router's CPU time per call, 0 when not measured.
func (c *cell) cpuPerCall() time.Duration {
	if c.calls == 0 {
		return 0
	}
	return c.cpu / time.Duration(c.calls)
}

// run calls the variant from callers goroutines for d and returns the calls that succeeded;
// into c, when not nil, go their latencies and failures.
func (v *variant) run(ctx context.Context, callers int, body []byte, d time.Duration, c *cell) int {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
		ok int
	)
	end := time.Now().Add(d)
	for range callers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			var fails int
			var firstErr error
			for time.Now().Before(end) {
				t := time.Now()
				_, err := v.call(ctx, body)
				if err != nil {
					fails++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			defer mu.Unlock()
			ok += len(lat)
			if c != nil {
				c.latencies = append(c.latencies, lat...)
				c.failures += fails
				if c.firstError == nil {
					c.firstError = firstErr
				}
			}
		})
	}
	wg.Wait()
	return ok
}

func (v *variant) failures() int {
	n := 0
	for _, c := range v.cells {
		n += c.failures
	}
	return n
}

// percentile is the q-quantile (0 < q < 1) of the cell's latencies.
func (c *cell) percentile(q float64) time.Duration {
	if len(c.latencies) == 0 {
		return 0
	}
	if !slices.IsSorted(c.latencies) {
		slices.Sort(c.latencies)
	}
	return c.latencies[int(q*float64(len(c.latencies)-1))]
}

// throughput is the median of the rounds' throughputs.
func (c *cell) throughput() float64 {
	t := slices.Clone(c.throughputs)
	slices.Sort(t)
	if len(t) == 0 {
		return 0
	}
	return t[len(t)/2]
}

// roundRatios is the lowest and the highest ratio of a's throughput to b's measured in the
// same round: how far the noise of the machine moves a ratio from round to round.
func roundRatios(a, b *cell) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range min(len(a.throughputs), len(b.throughputs)) {
		if b.throughputs[i] > 0 {
			r := a.throughputs[i] / b.throughputs[i]
			lo, hi = min(lo, r), max(hi, r)
		}
	}
	return lo, hi
}

// spread is the slowest and the fastest round's throughput.
func (c *cell) spread() (float64, float64) {
	if len(c.throughputs) == 0 {
		return 0, 0
	}
	return slices.Min(c.throughputs), slices.Max(c.throughputs)
}
