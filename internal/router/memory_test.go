package router

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	runtimemetrics "runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSlowCallersMemory measures what the router's process holds while many callers send
// large bodies slowly through three echo steps, all on loopback in this process: the peak
// resident memory, the peak heap and the peak of the buffer budget, next to the bytes of
// bodies in flight. It is a measurement, not a check: it runs only with
// ROUTER_MEMORY_CALLERS set (e.g. ROUTER_MEMORY_CALLERS=64; ROUTER_MEMORY_SIZE and
// ROUTER_MEMORY_RATE, in bytes and bytes per second, default to 1 MiB and 64 KiB/s).
func TestSlowCallersMemory(t *testing.T) {
	callers := envInt(t, "ROUTER_MEMORY_CALLERS", 0)
	if callers == 0 {
		t.Skip("a measurement: set ROUTER_MEMORY_CALLERS to run it")
	}
	size := envInt(t, "ROUTER_MEMORY_SIZE", 1<<20)
	rate := envInt(t, "ROUTER_MEMORY_RATE", 64<<10)

	// The steps answer what they are sent, streamed and without a Content-Length (chunked), so
	// that they hold little of this process's memory themselves.
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, r.Body)
	}
	var steps []Step
	for _, name := range []string{"one", "two", "three"} {
		steps = append(steps, Step{Name: name, URL: newStep(t, echo).URL})
	}
	tr := newTestRouter(t, Config{Steps: steps})

	runtime.GC()
	idle := sampleMemory()
	var (
		mu              sync.Mutex
		arriving, total memorySample
		budgetPeak      int64
		sending         = true
	)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			s := sampleMemory()
			mu.Lock()
			total.maxOf(s)
			if sending {
				arriving.maxOf(s)
			}
			budgetPeak = max(budgetPeak, tr.budget.used.Load())
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: callers, DisableCompression: true}}
	piece := bytes.Repeat([]byte("x"), 4096)
	start := time.Now()
	var wg sync.WaitGroup
	failed := make(chan string, callers)
	for range callers {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, tr.url, &paced{left: size, rate: rate, piece: piece})
			if err != nil {
				failed <- err.Error()
				return
			}
			req.ContentLength = int64(size)
			req.Header.Set("Content-Type", "application/json")
			res, err := client.Do(req)
			if err != nil {
				failed <- err.Error()
				return
			}
			n, _ := io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK || n != int64(size) {
				failed <- fmt.Sprintf("%s, %d bytes", res.Status, n)
			}
		})
	}
	// The bodies are all still arriving until about size/rate.
	time.Sleep(time.Duration(float64(size)/float64(rate)*0.95) * time.Second)
	mu.Lock()
	sending = false
	mu.Unlock()
	wg.Wait()
	close(stop)
	<-sampled
	close(failed)
	for f := range failed {
		t.Errorf("a caller failed: %s", f)
	}
	inFlight := int64(callers) * int64(size)
	t.Logf("%d callers × %s at %s/s: %s of bodies in flight, took %s", callers, mebibytes(int64(size)),
		mebibytes(int64(rate)), mebibytes(inFlight), time.Since(start).Round(time.Millisecond))
	t.Logf("idle:                 %s", idle)
	t.Logf("peak, bodies arriving: %s", arriving)
	t.Logf("peak, whole run:       %s; budget %s", total, mebibytes(budgetPeak))
}

// paced yields left bytes at rate bytes per second, in pieces.
type paced struct {
	left, rate int
	piece      []byte
}

func (p *paced) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n := min(len(b), len(p.piece), p.left)
	time.Sleep(time.Duration(n) * time.Second / time.Duration(p.rate))
	copy(b, p.piece[:n])
	p.left -= n
	return n, nil
}

// memorySample is the process's resident memory and the Go heap at one moment.
type memorySample struct {
	rss, heap, goal, released int64
}

var memoryMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/gc/heap/goal:bytes",
	"/memory/classes/heap/released:bytes",
}

func sampleMemory() memorySample {
	ms := make([]runtimemetrics.Sample, len(memoryMetrics))
	for i, name := range memoryMetrics {
		ms[i].Name = name
	}
	runtimemetrics.Read(ms)
	return memorySample{rss: vmRSS(), heap: int64(ms[0].Value.Uint64()), goal: int64(ms[1].Value.Uint64()),
		released: int64(ms[2].Value.Uint64())}
}

func (s *memorySample) maxOf(o memorySample) {
	s.rss, s.heap, s.goal, s.released = max(s.rss, o.rss), max(s.heap, o.heap), max(s.goal, o.goal), max(s.released, o.released)
}

func (s memorySample) String() string {
	return fmt.Sprintf("RSS %s, heap objects %s, heap goal %s", mebibytes(s.rss), mebibytes(s.heap), mebibytes(s.goal))
}

// vmRSS is this process's resident memory, from /proc (0 where there is none).
func vmRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mebibytes(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q is not a number", name, v)
	}
	return n
}
