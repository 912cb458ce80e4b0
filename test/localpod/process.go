package localpod

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

	"github.com/onsi/ginkgo/v2"
)

// Process is a program the test runs in the background, as a Deployment's pod would run it:
// restarted when it exits on its own (OLM's operators do, e.g. after labelling objects), its
// output appended to a log file, stopped with SIGTERM.
type Process struct {
	Name    string
	Path    string
	Args    []string
	Env     []string
	LogFile string

	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	pid      int
	restarts int
}

// Start runs p until stop, restarting it a second after it exits.
func (p *Process) Start() {
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
				ginkgo.GinkgoWriter.Printf("%s: %v (restarting; log %s)\n", p.Name, err, p.LogFile)
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
}

// run runs p's program once; the first run starts a new log, restarts append to it.
func (p *Process) run(ctx context.Context, first bool) error {
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if first {
		flags |= os.O_TRUNC
	}
	log, err := os.OpenFile(p.LogFile, flags, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.CommandContext(ctx, p.Path, p.Args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = p.Env, log, log
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
	Peaks.watch(p.Name, cmd.Process.Pid)
	err = cmd.Wait()
	p.mu.Lock()
	p.pid = 0
	p.mu.Unlock()
	return err
}

// Restarts is how many times p's program was started again after it exited.
func (p *Process) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// Stop ends p and waits for it.
func (p *Process) Stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
}

// Running reports whether p's program runs now.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid != 0
}

// Environ is the test's environment without entries that change how OLM's operators behave
// (CI turns on a development-only check of the objects they create), plus extra.
func Environ(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "CI" && k != "KUBECONFIG" {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// PeakMemory records the peak resident memory of the test's processes, per name.
type PeakMemory struct {
	mu  sync.Mutex
	kib map[string]int
}

// Peaks records the peak memory of every Process.
var Peaks = &PeakMemory{kib: map[string]int{}}

// watch samples pid's peak resident memory every second while it lives.
func (m *PeakMemory) watch(name string, pid int) {
	go func() {
		for m.sample(name, pid) {
			time.Sleep(time.Second)
		}
	}()
}

// sample reads pid's VmHWM (the kernel's peak resident set) and reports whether pid still lives.
func (m *PeakMemory) sample(name string, pid int) bool {
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

// Report lists the peaks, largest first, and their sum.
func (m *PeakMemory) Report() string {
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
