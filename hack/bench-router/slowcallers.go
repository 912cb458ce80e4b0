package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// slowCallers is the router under callers that send their bodies slowly: clients callers each
// send size bytes at rate bytes per second while callers normal callers keep calling, compared
// with the same normal traffic without them, in the same run.
type slowCallers struct {
	clients, size, rate, callers int
	// baseline and during are the normal traffic's calls without and with the slow callers.
	baseline, during cell
	// idleRSS is the router's resident memory before the slow callers, peakRSS the most it
	// held while they sent.
	idleRSS, peakRSS int64
	// outcomes counts the slow callers' answers (status, or the error).
	outcomes map[string]int
	took     time.Duration
}

// slowBody yields size bytes of a JSON document at rate bytes per second, in small pieces.
type slowBody struct {
	left, rate int
	piece      []byte
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(b.piece), b.left)
	time.Sleep(time.Duration(n) * time.Second / time.Duration(b.rate))
	copy(p, b.piece[:n])
	b.left -= n
	return n, nil
}

// slowJSON is a JSON document of size bytes: the request of a slow caller.
func slowJSON(size int) []byte {
	head, tail := `{"items":["`, `"]}`
	return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
}

// rss is the resident memory of process pid, in bytes, from /proc.
func rss(pid int) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
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

// measureSlowCallers runs the scenario against the router r (called through v) with body as
// the normal callers' request.
func measureSlowCallers(ctx context.Context, r *process, v *variant, body []byte, s *slowCallers, d time.Duration) {
	start := time.Now()
	fmt.Fprintf(os.Stderr, ">> slow callers: %d normal callers alone for %s\n", s.callers, d)
	v.run(ctx, s.callers, body, d, &s.baseline)
	s.idleRSS = rss(r.cmd.Process.Pid)
	s.outcomes = map[string]int{}

	// The resident memory, sampled while the slow callers send.
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			s.peakRSS = max(s.peakRSS, rss(r.cmd.Process.Pid))
			select {
			case <-sampling.Done():
				return
			case <-tick.C:
			}
		}
	}()

	fmt.Fprintf(os.Stderr, ">> slow callers: %d callers sending %d bytes at %d bytes/s, with the normal callers\n",
		s.clients, s.size, s.rate)
	doc := slowJSON(s.size)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for range s.clients {
		wg.Go(func() {
			outcome := slowCall(ctx, r.url, doc, s.rate)
			mu.Lock()
			defer mu.Unlock()
			s.outcomes[outcome]++
		})
	}
	// The normal traffic runs while every slow caller is still sending.
	sending := time.Duration(s.size) * time.Second / time.Duration(s.rate)
	time.Sleep(min(time.Second, sending/4))
	v.run(ctx, s.callers, body, min(d, sending/2), &s.during)
	wg.Wait()
	stopSampling()
	<-sampled
	s.took = time.Since(start)
}

// slowCall sends doc to url at rate bytes per second and says how the router answered.
func slowCall(ctx context.Context, url string, doc []byte, rate int) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url,
		&slowBody{left: len(doc), rate: rate, piece: doc[:min(len(doc), 4096)]})
	if err != nil {
		return "error: " + err.Error()
	}
	req.ContentLength = int64(len(doc))
	req.Header.Set("Content-Type", "application/json")
	res, err := slowClient.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer func() { _ = res.Body.Close() }()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.Status
}

// slowClient is a client of its own, so that the slow callers' connections do not take the
// normal callers' idle connections.
var slowClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, DisableCompression: true}}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func kib(n int64) string { return fmt.Sprintf("%d KiB", n>>10) }

// markdown is the section of the report on slow callers.
func (s *slowCallers) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Slow callers\n\n%d callers each send a body of %s at %s/s (%s each) to the pipeline router, while %d\n"+
		"callers send the normal request as fast as the router answers; the same %d callers alone, just before, are the\n"+
		"baseline. The router's resident memory (VmRSS) is sampled every 50 ms. Took %s.\n\n",
		s.clients, mib(int64(s.size)), kib(int64(s.rate)), time.Duration(s.size)*time.Second/time.Duration(s.rate),
		s.callers, s.callers, s.took.Round(time.Second))
	fmt.Fprintf(&b, "| | normal traffic p50 | normal traffic p99 | normal calls failed | router memory |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| normal callers alone | %s | %s | %d | %s |\n", ms(s.baseline.percentile(0.5)), ms(s.baseline.percentile(0.99)),
		s.baseline.failures, mib(s.idleRSS))
	fmt.Fprintf(&b, "| with %d slow callers | %s | %s | %d | %s (peak) |\n", s.clients, ms(s.during.percentile(0.5)),
		ms(s.during.percentile(0.99)), s.during.failures, mib(s.peakRSS))
	fmt.Fprintf(&b, "\nThe slow callers' answers:")
	keys := make([]string, 0, len(s.outcomes))
	for k := range s.outcomes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s × %d;", k, s.outcomes[k])
	}
	b.WriteString("\n")
	return b.String()
}
