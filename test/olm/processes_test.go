package olm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
)

// process is a program the test runs in the background, as a Deployment's pod would run it:
// restarted when it exits on its own (OLM's operators do, e.g. after labelling objects), its
// output appended to a log file, stopped with SIGTERM.
type process struct {
	name    string
	path    string
	args    []string
	env     []string
	logFile string

	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	pid      int
	restarts int
}

// start runs p until stop, restarting it a second after it exits.
func (p *process) start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		for first := true; ; first = false {
			if !first {
				p.mu.Lock()
				p.restarts++
				p.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
			if err := p.run(ctx, first); err != nil && ctx.Err() == nil {
				GinkgoWriter.Printf("%s: %v (restarting; log %s)\n", p.name, err, p.logFile)
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
}

// run runs p's program once; the first run starts a new log, restarts append to it.
func (p *process) run(ctx context.Context, first bool) error {
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if first {
		flags |= os.O_TRUNC
	}
	log, err := os.OpenFile(p.logFile, flags, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.CommandContext(ctx, p.path, p.args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = p.env, log, log
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	// Killed with the test process, even when a timeout ends it without cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.mu.Lock()
	p.pid = cmd.Process.Pid
	p.mu.Unlock()
	peaks.watch(p.name, cmd.Process.Pid)
	err = cmd.Wait()
	p.mu.Lock()
	p.pid = 0
	p.mu.Unlock()
	return err
}

// stop ends p and waits for it.
func (p *process) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
}

// running reports whether p's program runs now.
func (p *process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid != 0
}

// environ is the test's environment without entries that change how OLM's operators behave
// (CI turns on a development-only check of the objects they create), plus extra.
func environ(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "CI" && k != "KUBECONFIG" {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// peakMemory records the peak resident memory of the test's processes, per name.
type peakMemory struct {
	mu  sync.Mutex
	kib map[string]int
}

var peaks = &peakMemory{kib: map[string]int{}}

// watch samples pid's peak resident memory every second while it lives.
func (m *peakMemory) watch(name string, pid int) {
	go func() {
		for m.sample(name, pid) {
			time.Sleep(time.Second)
		}
	}()
}

// sample reads pid's VmHWM (the kernel's peak resident set) and reports whether pid still lives.
func (m *peakMemory) sample(name string, pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			m.mu.Lock()
			m.kib[name] = max(m.kib[name], kib)
			m.mu.Unlock()
		}
	}
	return true
}

// report lists the peaks, largest first, and their sum.
func (m *peakMemory) report() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.kib))
	total := 0
	for n, kib := range m.kib {
		names = append(names, n)
		total += kib
	}
	sort.Slice(names, func(i, j int) bool { return m.kib[names[i]] > m.kib[names[j]] })
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d MiB", n, m.kib[n]/1024))
	}
	return fmt.Sprintf("peak resident memory: %s (sum %d MiB)", strings.Join(parts, ", "), total/1024)
}
