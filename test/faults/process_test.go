package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// managerBinary builds ./cmd once per run of the suite, into dir.
var managerBinary = struct {
	once sync.Once
	dir  string
	path string
	err  error
}{}

func buildManager(r *run) string {
	r.Helper()
	managerBinary.once.Do(func() {
		build := exec.Command("go", "build", "-o", filepath.Join(managerBinary.dir, "manager"), "./cmd")
		build.Dir = testenv.RepoPath()
		out, err := build.CombinedOutput()
		if err != nil {
			managerBinary.err = fmt.Errorf("go build ./cmd: %w: %s", err, out)
		}
		managerBinary.path = filepath.Join(managerBinary.dir, "manager")
	})
	if managerBinary.err != nil {
		r.Fatalf("%v", managerBinary.err)
	}
	return managerBinary.path
}

// restartDelay is how long the supervisor waits before it starts an exited manager again
// (the kubelet's first restart of a crashed container is about as quick).
const restartDelay = time.Second

// exit is the end of one manager process.
type exit struct {
	at     time.Time
	status string // as the process ended: "exit status 1", "signal: killed"
	reason string // the last error the manager logged
}

// managerProcess runs the manager binary (cmd/) as the operator's image runs it, with
// --leader-elect, against the case's apiserver as its own user. Supervised, it is started again
// whenever it exits, as the kubelet restarts a container; kill ends the running process with
// SIGKILL.
type managerProcess struct {
	user      string
	args      []string
	env       []string
	logPath   string
	supervise bool
	// kubeconfig makes the kubeconfig of a process: each process writes as its own user,
	// <user>.<n>, so that the audit log tells them apart.
	kubeconfig func(user string) (string, error)

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has ended
	logFrom int64         // where cmd's lines start in the log
	starts  int
	exits   []exit
	stopped bool
	done    chan struct{}
}

// startManagerProcess starts the manager binary as user, electing its leader through the
// Lease in namespace ns.
func startManagerProcess(r *run, cp *controlPlane, user, ns string, supervise bool) *managerProcess {
	r.Helper()
	bin := buildManager(r)
	m := &managerProcess{
		user: user,
		// The test process serves the conversion webhook (see startControlPlane).
		args: []string{bin, "--enable-webhooks=false", "--conversion-crd=", "--metrics-bind-address=0", "--health-probe-bind-address=0",
			"--leader-elect", "--leader-election-namespace=" + ns},
		env:        append(os.Environ(), "OPERATOR_CONDITION_NAME=", resources.EnvRouterImage+"="+routerImage),
		logPath:    filepath.Join(cp.dir, user+".log"),
		supervise:  supervise,
		kubeconfig: cp.kubeconfig,
		done:       make(chan struct{}),
	}
	if err := m.start(); err != nil {
		r.Fatalf("start the manager: %v", err)
	}
	go m.watch()
	r.Cleanup(func() {
		m.stop()
		if r.Failed() {
			r.Logf("the end of the log of manager %s:\n%s", user, m.logTail(40))
		}
	})
	return m
}

func (m *managerProcess) start() error {
	log, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	info, err := log.Stat()
	if err != nil {
		_ = log.Close()
		return err
	}
	m.mu.Lock()
	user := fmt.Sprintf("%s.%d", m.user, m.starts+1)
	m.mu.Unlock()
	kubeconfig, err := m.kubeconfig(user)
	if err != nil {
		_ = log.Close()
		return err
	}
	cmd := exec.Command(m.args[0], m.args[1:]...)
	cmd.Env = append(slices.Clone(m.env), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	// Killed with the test process, even when a timeout ends it without cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return err
	}
	exited := make(chan struct{})
	m.mu.Lock()
	m.cmd, m.exited, m.logFrom = cmd, exited, info.Size()
	m.starts++
	m.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(exited)
	}()
	return nil
}

// watch waits for each process to end, records why, and starts the next one when supervised.
func (m *managerProcess) watch() {
	defer close(m.done)
	for {
		m.mu.Lock()
		cmd, exited, from := m.cmd, m.exited, m.logFrom
		m.mu.Unlock()
		<-exited
		m.mu.Lock()
		m.exits = append(m.exits, exit{at: time.Now(), status: cmd.ProcessState.String(), reason: lastError(m.logPath, from)})
		again := m.supervise && !m.stopped
		m.mu.Unlock()
		if !again {
			return
		}
		time.Sleep(restartDelay)
		m.mu.Lock()
		stopped := m.stopped
		m.mu.Unlock()
		if stopped {
			return
		}
		if err := m.start(); err != nil {
			m.mu.Lock()
			m.exits = append(m.exits, exit{at: time.Now(), status: "not started again", reason: err.Error()})
			m.mu.Unlock()
			return
		}
	}
}

// kill sends SIGKILL to the running process and returns when.
func (m *managerProcess) kill() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	return time.Now()
}

// stop ends supervision and the running process; stopping twice is harmless.
func (m *managerProcess) stop() {
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	// An ended process refuses the signal, harmlessly.
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	m.mu.Unlock()
	<-m.done
}

// history describes the starts and exits of the manager, for the report.
func (m *managerProcess) history() (starts int, exits []exit) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.starts, append([]exit(nil), m.exits...)
}

// describeExits describes how manager processes ended: each kind of end once, with a count.
func describeExits(exits []exit) string {
	if len(exits) == 0 {
		return "none"
	}
	count := map[string]int{}
	var order []string
	for _, e := range exits {
		s := e.status
		if e.reason != "" {
			s += ` after "` + shortReason(e.reason) + `"`
		}
		if count[s] == 0 {
			order = append(order, s)
		}
		count[s]++
	}
	parts := make([]string, 0, len(order))
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%d × %s", count[s], s))
	}
	return strings.Join(parts, "; ")
}

// shortReason keeps of a logged error its message and the innermost cause ("unable to create
// manager: … connection refused"): the middle names addresses and kinds that differ from
// process to process.
func shortReason(reason string) string {
	parts := strings.Split(reason, ": ")
	if len(parts) <= 2 {
		return reason
	}
	return parts[0] + ": … " + parts[len(parts)-1]
}

// logTail is the end of the manager's log, for failure messages.
func (m *managerProcess) logTail(lines int) string {
	data, err := os.ReadFile(m.logPath)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// lastError is the message of the last error the manager logged (JSON lines of zap) from offset
// from of its log on, with its error, or "".
func lastError(path string, from int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(from, 0); err != nil {
		return ""
	}
	last := ""
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		var entry struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Error string `json:"error"`
		}
		if json.Unmarshal(s.Bytes(), &entry) != nil || entry.Level != "error" {
			continue
		}
		last = entry.Msg
		if entry.Error != "" {
			last += ": " + entry.Error
		}
	}
	return last
}
