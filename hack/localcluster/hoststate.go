package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// hostState is what a cluster with real nodes changes on the machine, recorded before it
// changes it, so that down puts the machine back as it was: the kernel settings the kubelet
// sets, the host paths that the kubelet, containerd and CNI use whatever they are told, the
// network namespace, and the cgroups of the nodes.
type hostState struct {
	Netns string     `json:"netns"`
	Nodes []realNode `json:"nodes"`
	// Sysctls are the kernel settings the kubelet changes, as they were.
	Sysctls map[string]string `json:"sysctls"`
	// MadeHostPaths are the host paths that did not exist before: down removes them.
	MadeHostPaths []string `json:"madeHostPaths"`
	// Cgroups are the cgroup directories made for the nodes, parents first, in every hierarchy.
	Cgroups []string `json:"cgroups"`
	// NetnsDirUnmounted is true when netnsDir was not a mount point before: `ip netns add`
	// makes it one (a shared bind mount of itself) and leaves it; down undoes that once no
	// network namespace is left in it. NetnsDirMade is true when it did not exist.
	NetnsDirUnmounted bool `json:"netnsDirUnmounted"`
	NetnsDirMade      bool `json:"netnsDirMade"`
}

// netnsDir is where `ip netns` keeps the named network namespaces.
const netnsDir = "/run/netns"

// kubeletSysctls are the kernel settings the kubelet sets at start (its container manager's
// defaults), global to the machine.
var kubeletSysctls = []string{
	"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
}

// hostPaths are the host paths the nodes use wherever their directories are: the kubelet's
// links to container logs, containerd's shim sockets, CNI's result cache.
var hostPaths = []string{"/var/log/containers", "/run/containerd", "/var/lib/cni", "/var/lib/kubelet"}

func sysctlFile(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}

// recordHostState reads what the cluster will change and writes it to the cluster's directory
// before anything changes.
func (c *cluster) recordHostState() error {
	h := c.host
	h.Sysctls = map[string]string{}
	for _, key := range kubeletSysctls {
		data, err := os.ReadFile(sysctlFile(key))
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		h.Sysctls[key] = strings.TrimSpace(string(data))
	}
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			h.MadeHostPaths = append(h.MadeHostPaths, p)
		}
	}
	_, err := os.Lstat(netnsDir)
	h.NetnsDirMade = errors.Is(err, os.ErrNotExist)
	mounts, err := mountsUnder(netnsDir)
	if err != nil {
		return err
	}
	h.NetnsDirUnmounted = !slices.Contains(mounts, netnsDir)
	return c.saveHostState()
}

func (c *cluster) saveHostState() error {
	data, err := json.MarshalIndent(c.host, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.path("host-state.json"), data, 0o644)
}

func (c *cluster) loadHostState() (*hostState, error) {
	data, err := os.ReadFile(c.path("host-state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h := &hostState{}
	return h, json.Unmarshal(data, h)
}

// cgroupHierarchy is one mounted cgroup v1 hierarchy, or the v2 one.
type cgroupHierarchy struct {
	mount string
	// own is the cgroup of this process in the hierarchy.
	own string
}

// cgroupHierarchies lists the mounted cgroup hierarchies with this process's cgroup in each.
func cgroupHierarchies() ([]cgroupHierarchy, error) {
	own := map[string]string{} // controllers (or "" for v2) -> path
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) == 3 {
			own[parts[1]] = parts[2]
		}
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var hs []cgroupHierarchy
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || len(fields) < sep+4 {
			continue
		}
		if fields[sep+1] == "cgroup2" {
			// runc makes a pod's cgroup in the unified hierarchy too, beside the v1 ones.
			hs = append(hs, cgroupHierarchy{mount: fields[4], own: own[""]})
			continue
		}
		if fields[sep+1] != "cgroup" {
			continue
		}
		var ctrls []string
		for _, o := range strings.Split(fields[sep+3], ",") {
			if o != "rw" && o != "ro" && !strings.HasPrefix(o, "release_agent") && o != "clone_children" && o != "noprefix" && o != "xattr" {
				ctrls = append(ctrls, o)
			}
		}
		for key, path := range own {
			if key == "" {
				continue
			}
			got := strings.Split(key, ",")
			slices.Sort(got)
			slices.Sort(ctrls)
			if slices.Equal(got, ctrls) {
				hs = append(hs, cgroupHierarchy{mount: fields[4], own: path})
			}
		}
	}
	return hs, s.Err()
}

// nodeCgroupRoot is the cgroup root of node name's kubelet: under this process's memory cgroup,
// so that every pod counts in the resources of the run that started the cluster.
func nodeCgroupRoot(clusterName, node string) (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	base := "/"
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "memory") {
			base = parts[2]
		}
	}
	return filepath.Join(base, clusterName, node), nil
}

// makeCgroupRoot makes root in every cgroup hierarchy, recording each directory it makes. A new
// cpuset cgroup starts with no CPUs and no memory nodes: each gets its parent's.
func (c *cluster) makeCgroupRoot(root string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := h.mount
		for _, part := range strings.Split(strings.Trim(root, "/"), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if _, err := os.Stat(dir); err == nil {
				continue
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
			c.host.Cgroups = append(c.host.Cgroups, dir)
			if err := c.saveHostState(); err != nil {
				return err
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if v, err := os.ReadFile(filepath.Join(parent, f)); err == nil {
					if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
						return fmt.Errorf("copy %s to %s: %w", f, dir, err)
					}
				}
			}
		}
	}
	return nil
}

// removeCgroups ends every process left in the nodes' cgroups and removes the cgroups, deepest
// first, those below the recorded ones (the kubelet's and runc's) included.
func removeCgroups(made []string) error {
	var all []string
	for _, top := range made {
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && !slices.Contains(all, p) {
				all = append(all, p)
			}
			return nil
		})
	}
	slices.SortFunc(all, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, dir := range all {
		var err error
		for range 50 {
			killAll(dir)
			if err = syscall.Rmdir(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// killAll kills the processes of a cgroup.
func killAll(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// mountsUnder lists the mount points at or below any of dirs, deepest first.
func mountsUnder(dirs ...string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var found []string
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range dirs {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				found = append(found, mp)
				break
			}
		}
	}
	slices.SortFunc(found, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return slices.Compact(found), nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll detaches every mount below dirs.
func unmountAll(dirs ...string) error {
	mounts, err := mountsUnder(dirs...)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// restoreNetnsDir unmounts netnsDir, and removes it, when the cluster made it a mount point, and
// made it, and no network namespace is left in it (another user's stays, and so does the mount).
func restoreNetnsDir(h *hostState) error {
	if !h.NetnsDirUnmounted {
		return nil
	}
	if entries, err := os.ReadDir(netnsDir); err != nil || len(entries) > 0 {
		return nil
	}
	if err := syscall.Unmount(netnsDir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("unmount %s: %w", netnsDir, err)
	}
	if h.NetnsDirMade {
		return os.Remove(netnsDir)
	}
	return nil
}

// processesUsing lists the processes whose command line names any of words (a directory of the
// cluster, a socket of its containerd): the shims containerd leaves running on their own.
func processesUsing(words ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, w := range words {
			if strings.Contains(string(cmdline), w) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// restoreHost puts back what recordHostState recorded, once every process of the nodes has
// ended: the processes left, the mounts, the cgroups, the network namespace, the host paths
// made and the kernel settings.
func (c *cluster) restoreHost(h *hostState) error {
	var errs []error
	abs, _ := filepath.Abs(c.dir)
	for range 50 {
		left := processesUsing(filepath.Join(abs, "nodes") + "/")
		if len(left) == 0 {
			break
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := removeCgroups(h.Cgroups); err != nil {
		errs = append(errs, err)
	}
	if err := unmountAll(abs, "/run/containerd", "/var/lib/kubelet"); err != nil {
		errs = append(errs, err)
	}
	if h.Netns != "" {
		if _, err := os.Stat(netnsPath(h.Netns)); err == nil {
			if out, err := exec.Command("ip", "netns", "delete", h.Netns).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("delete network namespace %s: %w: %s", h.Netns, err, out))
			}
		}
	}
	if err := restoreNetnsDir(h); err != nil {
		errs = append(errs, err)
	}
	for _, p := range h.MadeHostPaths {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	// The kubelet writes its kernel settings once at start: set back after it stopped, they stay.
	for key, value := range h.Sysctls {
		if err := os.WriteFile(sysctlFile(key), []byte(value), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s=%s: %w", key, value, err))
		}
	}
	if len(errs) == 0 {
		// The nodes' directories hold only what the nodes made; the rest of the directory stays.
		errs = append(errs, os.RemoveAll(c.path("nodes")), os.Remove(c.path("host-state.json")))
	}
	return errors.Join(errs...)
}
