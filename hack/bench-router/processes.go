package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// kserveAddr is where KServe's router listens: its port is fixed (8080, all addresses).
const kserveAddr = "127.0.0.1:8080"

// process is a router running as a child process.
type process struct {
	url, adminURL string
	// grpcAddr is where it serves the Open Inference Protocol's gRPC service, when it does
	// (--grpc-listen).
	grpcAddr string
	cmd      *exec.Cmd
	dir      string
	// unknownFlags are the optional flags of the benchmark the binary does not define, and runs
	// without (a router built from an older revision).
	unknownFlags []string
}

func (p *process) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}

// benchStopWhen is the stopWhen of every step of the router measured with one: never true on
// the echoed request, so every answer is read and evaluated.
const benchStopWhen = "size(response.items) == 0"

// startRouter runs the pipeline router in front of the steps, with stopWhen on every step when
// it is not empty, and returns once it serves.
func startRouter(ctx context.Context, bin string, urls []string, stopWhen string) (*process, error) {
	cfg := routerconfig.Config{Pipeline: "bench/pipeline"}
	for i, u := range urls {
		cfg.Steps = append(cfg.Steps, routerconfig.Step{Name: "step-" + strconv.Itoa(i+1), URL: u, TimeoutSeconds: 30, StopWhen: stopWhen})
	}
	return startRouterConfig(ctx, bin, cfg)
}

// startRouterConfig runs the pipeline router with cfg, and with flags after the benchmark's
// own, and returns once it serves.
func startRouterConfig(ctx context.Context, bin string, cfg routerconfig.Config, flags ...string) (*process, error) {
	dir, err := os.MkdirTemp("", "bench-router-")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "router.json")
	data, _ := json.Marshal(cfg)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return nil, err
	}
	args := []string{"--config", file, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}
	var unknown []string
	for _, f := range []string{"--profiling"} {
		if definesFlag(ctx, bin, f) {
			args = append(args, f)
		} else {
			unknown = append(unknown, f)
		}
	}
	args = append(args, flags...)
	cmd := exec.CommandContext(ctx, bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, dir: dir, unknownFlags: unknown}
	// grpcListen is logged as "" when the router serves no gRPC, and not at all by a router from
	// before it could.
	re := regexp.MustCompile(` listen=(\S+) metricsListen=(\S+)(?: grpcListen=(\S+))?`)
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
			}
		}
	}()
	select {
	case m := <-found:
		p.url, p.adminURL, p.grpcAddr = "http://"+m[1]+"/", "http://"+m[2], strings.Trim(m[3], `"`)
		return p, nil
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s did not start within 30 s", bin)
	}
}

// definesFlag says whether the router binary bin defines flag ("--name"), as its usage (-h)
// lists it.
func definesFlag(ctx context.Context, bin, flag string) bool {
	usage, _ := exec.CommandContext(ctx, bin, "-h").CombinedOutput() // it exits with an error after -h
	return regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(strings.TrimLeft(flag, "-")) + `(\s|$)`).Match(usage)
}

// kserveGraph is the InferenceGraph spec of a Sequence of the steps, each after the first
// given the previous step's response ($response), as KServe's controller hands it to its
// router.
func kserveGraph(urls []string) string {
	type step struct {
		Name       string `json:"name"`
		ServiceURL string `json:"serviceUrl"`
		Data       string `json:"data,omitempty"`
	}
	var steps []step
	for i, u := range urls {
		s := step{Name: "step-" + strconv.Itoa(i+1), ServiceURL: u}
		if i > 0 {
			s.Data = "$response"
		}
		steps = append(steps, s)
	}
	b, _ := json.Marshal(map[string]any{"nodes": map[string]any{"root": map[string]any{"routerType": "Sequence", "steps": steps}}})
	return string(b)
}

// startKServe runs KServe's router with the Sequence graph and returns once it is ready. Its
// log (several lines at info level per request, which it has no option to turn off) goes to
// /dev/null.
func startKServe(ctx context.Context, bin string, urls []string) (*process, error) {
	if c, err := net.DialTimeout("tcp", kserveAddr, time.Second); err == nil {
		_ = c.Close()
		return nil, errors.New(kserveAddr + " is in use already: KServe's router cannot listen anywhere else " +
			"(make bench-router runs in a network namespace of its own when run as root)")
	}
	cmd := exec.CommandContext(ctx, bin, "--graph-json", kserveGraph(urls))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, url: "http://" + kserveAddr + "/"}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		res, err := http.Get("http://" + kserveAddr + "/readyz")
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p, nil
			}
		}
	}
	p.stop()
	return nil, errors.New("not ready within 30 s")
}

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

// cpuTime is the CPU time (user and system, all threads) process pid has used, 0 for pid 0 or
// when /proc cannot tell.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: the fields counted start after it.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}
