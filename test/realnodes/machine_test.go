package realnodes

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/test/netns"
)

// machine is what of the machine the cluster may change while it runs and must put back.
type machine struct {
	sysctls    map[string]string
	namespaces []string
	mounts     []string
	cgroups    []string
	hostPaths  map[string]bool
}

// kernelSettings are the machine-wide settings a kubelet writes at start.
var kernelSettings = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// hostPaths are paths a node's components use wherever they are told to keep their state.
var hostPaths = []string{"/var/log/containers", "/run/containerd", "/var/lib/cni", "/var/lib/kubelet", "/var/log/pods", "/etc/cni", "/opt/cni"}

func readMachine() (*machine, error) {
	m := &machine{sysctls: map[string]string{}, hostPaths: map[string]bool{}}
	for _, k := range kernelSettings {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return nil, err
		}
		m.sysctls[k] = strings.TrimSpace(string(v))
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		m.namespaces = append(m.namespaces, e.Name())
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(mounts)) {
		if f := strings.Fields(line); len(f) > 4 {
			m.mounts = append(m.mounts, f[4])
		}
	}
	m.cgroups = cgroupTree()
	for _, p := range hostPaths {
		_, err := os.Lstat(p)
		m.hostPaths[p] = err == nil
	}
	return m, nil
}

// ownMemoryCgroup is this process's memory cgroup (the run's, that the cluster's pods must be
// under).
func ownMemoryCgroup() string {
	data, _ := os.ReadFile("/proc/self/cgroup")
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "memory") {
			return parts[2]
		}
	}
	return "/"
}

// othersCgroups reports whether a cgroup belongs to another process of the machine: it is
// beside the run's own memory cgroup, not in it (the cluster makes its cgroups in the run's
// own: hack/localcluster), as the cgroups a machine gives each process it starts are.
func othersCgroups() func(string) bool {
	own := ownMemoryCgroup()
	if own == "/" {
		return func(string) bool { return false }
	}
	ownDir := filepath.Join("/sys/fs/cgroup/memory", own)
	parent := filepath.Dir(ownDir)
	return func(c string) bool {
		inParent := strings.HasPrefix(c, parent+"/")
		inOwn := c == ownDir || strings.HasPrefix(c, ownDir+"/")
		return inParent && !inOwn
	}
}

// cgroupTree lists the cgroups of every hierarchy.
func cgroupTree() []string {
	var dirs []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	return dirs
}

// leftovers compares the machine with what it was before the cluster, and lists what the
// cluster left: a process of its directory, a mount, a cgroup, a network namespace, a host
// path, a kernel setting.
func leftovers(before *machine) []string {
	after, err := readMachine()
	if err != nil {
		return []string{err.Error()}
	}
	var left []string
	for k, v := range before.sysctls {
		if after.sysctls[k] != v {
			left = append(left, fmt.Sprintf("kernel setting %s is %s, was %s", k, after.sysctls[k], v))
		}
	}
	for _, n := range after.namespaces {
		if !slices.Contains(before.namespaces, n) {
			left = append(left, "network namespace "+n)
		}
	}
	for _, mp := range after.mounts {
		if !slices.Contains(before.mounts, mp) {
			left = append(left, "mount "+mp)
		}
	}
	others := othersCgroups()
	for _, c := range after.cgroups {
		if !slices.Contains(before.cgroups, c) && !others(c) {
			left = append(left, "cgroup "+c)
		}
	}
	for p, existed := range before.hostPaths {
		if after.hostPaths[p] && !existed {
			left = append(left, "host path "+p)
		}
	}
	abs, _ := filepath.Abs(clusterDir)
	mine := ancestors()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), abs+"/") && !mine[e.Name()] {
			left = append(left, fmt.Sprintf("process %s: %s", e.Name(), strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
	}
	return left
}

// ancestors are this process and those that started it (make's shell names the cluster's
// directory too).
func ancestors() map[string]bool {
	mine := map[string]bool{}
	for pid := os.Getpid(); pid > 1; {
		mine[fmt.Sprint(pid)] = true
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break
		}
		// The parent is the second field after the command, which is in parentheses.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(fields) < 2 {
			break
		}
		_, _ = fmt.Sscan(fields[1], &pid)
	}
	return mine
}

// The cluster's network namespace has no way out: an address of the machine's network (the
// seed's NFS server) fails at once, no route leads anywhere but the cluster's own addresses,
// and no link joins it to the machine's namespace.
func TestNetworkNamespaceHasNoWayOut(t *testing.T) {
	for _, addr := range []string{"192.168.20.235:2049", "8.8.8.8:53"} {
		start := time.Now()
		err := netns.Do(netnsPath, func() error {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err == nil {
				_ = c.Close()
			}
			return err
		})
		if !errors.Is(err, syscall.ENETUNREACH) {
			t.Errorf("dial %s inside the cluster: %v, want network unreachable", addr, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("dial %s inside the cluster failed after %s, want at once", addr, took)
		}
	}
	name := filepath.Base(netnsPath)
	routes, err := exec.Command("ip", "-n", name, "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v: %s", err, routes)
	}
	for line := range strings.Lines(string(routes)) {
		if strings.HasPrefix(line, "default") {
			t.Errorf("the cluster's namespace has a default route: %s", line)
		}
	}
	// The machine's own namespace (this test's) has no link whose other end is in the cluster's.
	links, err := exec.Command("ip", "-o", "link", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip link: %v: %s", err, links)
	}
	if strings.Contains(string(links), "link-netns "+name) {
		t.Errorf("a link of the machine's network namespace leads into the cluster's:\n%s", links)
	}
}

// Every process of every pod (the operator's, a model server's) runs in a cgroup below the
// cgroup of the run that started the cluster.
func TestPodsRunUnderTheRunsCgroup(t *testing.T) {
	waitOperatorPods(t)
	own := ownMemoryCgroup()
	var pods []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(data), "/kubepods") {
			continue
		}
		for line := range strings.Lines(string(data)) {
			parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(parts) < 3 || parts[1] == "" || !strings.Contains(parts[2], filepath.Base(netnsPath)) {
				continue
			}
			pods = append(pods, e.Name())
			if slices.Contains(strings.Split(parts[1], ","), "memory") && !strings.HasPrefix(parts[2], strings.TrimSuffix(own, "/")+"/") {
				t.Errorf("process %s of a pod is in memory cgroup %s, not below the run's %s", e.Name(), parts[2], own)
			}
		}
	}
	if len(pods) == 0 {
		t.Fatal("found no process of a pod of the cluster")
	}
}

func waitOperatorPods(t *testing.T) {
	t.Helper()
	if _, err := kubectlRun("-n", operatorNamespace, "wait", "--for=condition=Ready", "pod", "--all", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
}
