package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ndsl-cn/pipeline-operator/test/netns"
)

// The network of a cluster with real nodes, all inside one network namespace the cluster
// makes: one veth pair carries the control plane's, the DNS server's and the nodes' addresses;
// each node has a bridge for its pods; nothing routes out.
const (
	controlPlaneIP = "172.30.0.1"
	dnsIP          = "172.30.0.53"
	nodeNetPrefix  = "172.30.0."
	apiServerPort  = 6443
	clusterDomain  = "cluster.local"
	// podCIDR holds every node's pod subnet (10.244.N.0/24); simulated pods get addresses
	// from simulatedPodCIDR so that the two never meet.
	podCIDR          = "10.244.0.0/16"
	simulatedPodCIDR = "10.245.0.0/16"
	// sandboxImage is the pause image every pod's sandbox runs, built here (hack/pause).
	sandboxImage = "localhost/pause:local"
	// runc is Debian's, installed by hack/realnodes-packages.sh.
	runcBin = "/usr/sbin/runc"
)

// realNode is a node of the cluster run by a real kubelet, with its own containerd.
type realNode struct {
	Name string `json:"name"`
	// Index numbers the node from 1: its address, its pod subnet and its bridge follow it.
	Index int `json:"index"`
	// CgroupRoot is the kubelet's cgroupRoot, the same path in every cgroup hierarchy.
	CgroupRoot string `json:"cgroupRoot"`
}

func (n realNode) ip() string        { return fmt.Sprintf("%s%d", nodeNetPrefix, 10+n.Index) }
func (n realNode) podSubnet() string { return fmt.Sprintf("10.244.%d.0/24", n.Index) }
func (n realNode) bridge() string    { return fmt.Sprintf("cni%d", n.Index) }

func (c *cluster) nodeDir(n realNode, parts ...string) string {
	return c.path(append([]string{"nodes", n.Name}, parts...)...)
}

func (c *cluster) containerdSocket(n realNode) string { return c.nodeDir(n, "containerd.sock") }

// netnsName is the name of the cluster's network namespace, the same for the same directory.
func netnsName(dir string) string {
	abs, _ := filepath.Abs(dir)
	sum := sha256.Sum256([]byte(abs))
	return "localcluster-" + hex.EncodeToString(sum[:4])
}

func netnsPath(name string) string { return filepath.Join(netnsDir, name) }

// command is bin with args, run inside the cluster's network namespace when it has one.
// nsenter keeps the root mount namespace, which the kubelet and containerd must share (ip
// netns exec would remount /sys, and the kubelet then finds no cgroup mounts).
func (c *cluster) command(bin string, args ...string) *exec.Cmd {
	if c.host == nil {
		return exec.Command(bin, args...)
	}
	return exec.Command("nsenter", append([]string{"--net=" + netnsPath(c.host.Netns), "--", bin}, args...)...)
}

// makeNetwork makes the cluster's network namespace: loopback, the veth pair with every
// address of the cluster, forwarding and bridged traffic through netfilter (kube-proxy's
// rules must see a pod's answer to a pod of the same node), and no route out.
func (c *cluster) makeNetwork() error {
	ns := c.host.Netns
	if _, err := os.Stat(netnsPath(ns)); err == nil {
		// Left by a cluster of this directory that did not go down (its machine stopped, say).
		fmt.Printf("deleting network namespace %s, left by an earlier cluster of %s\n", ns, c.dir)
		if out, err := exec.Command("ip", "netns", "delete", ns).CombinedOutput(); err != nil {
			return fmt.Errorf("delete the earlier network namespace %s: %w: %s", ns, err, out)
		}
	}
	steps := [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "add", "cluster0", "type", "veth", "peer", "name", "cluster1"},
		{"-n", ns, "addr", "add", controlPlaneIP + "/24", "dev", "cluster0"},
		{"-n", ns, "addr", "add", dnsIP + "/24", "dev", "cluster0"},
	}
	for _, n := range c.host.Nodes {
		steps = append(steps, []string{"-n", ns, "addr", "add", n.ip() + "/24", "dev", "cluster0"})
	}
	// Service addresses need a route before kube-proxy's rules translate them, for connections
	// the namespace's own processes make (the apiserver's to webhooks): along the veth, whose
	// other end is in the namespace too.
	steps = append(steps, []string{"-n", ns, "link", "set", "cluster0", "up"}, []string{"-n", ns, "link", "set", "cluster1", "up"},
		[]string{"-n", ns, "route", "add", serviceCIDR, "dev", "cluster0"})
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	for key, value := range map[string]string{"net.ipv4.ip_forward": "1", "net.bridge.bridge-nf-call-iptables": "1"} {
		if out, err := c.command("sysctl", "-q", "-w", key+"="+value).CombinedOutput(); err != nil {
			return fmt.Errorf("set %s in the cluster's network namespace: %w: %s", key, err, out)
		}
	}
	return nil
}

// startDNS starts CoreDNS on the cluster's DNS address: it answers the cluster's Service and
// pod names from the apiserver, and nothing else.
func (c *cluster) startDNS() error {
	corefile := fmt.Sprintf(`.:53 {
    bind %[1]s
    errors
    health %[1]s:8080
    ready %[1]s:8181
    kubernetes %[2]s in-addr.arpa ip6.arpa {
        kubeconfig %[3]s
        pods insecure
    }
}
`, dnsIP, clusterDomain, c.insideKubeconfig())
	file := c.path("Corefile")
	if err := os.WriteFile(file, []byte(corefile), 0o644); err != nil {
		return err
	}
	if err := c.start("coredns", c.corednsBin, "-conf", file); err != nil {
		return err
	}
	return c.waitHTTP("coredns", "http://"+dnsIP+":8181/ready", c.netnsHTTP())
}

// startProxy starts one kube-proxy, in nftables mode, for the whole network namespace that
// every node shares. It leaves the machine's conntrack settings alone.
func (c *cluster) startProxy() error {
	config := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
clusterCIDR: %s
nodePortAddresses: [primary]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, c.insideKubeconfig(), c.host.Nodes[0].Name, podCIDR)
	file := c.path("kube-proxy.yaml")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		return err
	}
	if err := c.start("kube-proxy", filepath.Join(c.kubeBin, "kube-proxy"), "--config="+file); err != nil {
		return err
	}
	return c.waitHTTP("kube-proxy", "http://127.0.0.1:10256/livez", c.netnsHTTP())
}

// startContainerd starts node n's containerd: its own root, state, socket and runc state, the
// CNI network of the node's bridge, and the sandbox image built here. CRI may not lower
// oom_score_adj (this machine's root cannot), and pod network namespaces live under its state.
func (c *cluster) startContainerd(n realNode) error {
	root, state := c.nodeDir(n, "containerd", "root"), c.nodeDir(n, "containerd", "state")
	cniConf, ipam := c.nodeDir(n, "cni"), c.nodeDir(n, "cni-ipam")
	for _, d := range []string{root, state, cniConf, ipam} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	network := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "%[1]s",
  "plugins": [{
    "type": "bridge", "bridge": "%[2]s", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "%[3]s"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "%[4]s"}
  }]
}
`, n.Name, n.bridge(), n.podSubnet(), ipam)
	if err := os.WriteFile(filepath.Join(cniConf, "10-bridge.conflist"), []byte(network), 0o644); err != nil {
		return err
	}
	config := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins.'io.containerd.internal.v1.opt']
  path = %[5]q
[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[6]q
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = []
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = %[7]q
      Root = %[8]q
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[9]q]
    conf_dir = %[10]q
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
`, root, state, c.containerdSocket(n), c.containerdSocket(n)+".ttrpc", filepath.Join(root, "opt"), sandboxImage,
		runcBin, filepath.Join(state, "runc"), c.cniBin, cniConf)
	file := c.nodeDir(n, "containerd.toml")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		return err
	}
	name := "containerd-" + n.Name
	if err := c.start(name, filepath.Join(c.containerdBin, "containerd"), "--config", file); err != nil {
		return err
	}
	return c.wait(name, func() error {
		_, err := c.ctr(n, "version")
		return err
	})
}

// ctr runs containerd's ctr against node n's containerd, in the namespace of the CRI.
func (c *cluster) ctr(n realNode, args ...string) ([]byte, error) {
	out, err := exec.Command(filepath.Join(c.containerdBin, "ctr"),
		append([]string{"--address", c.containerdSocket(n), "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s on node %s: %w: %s", strings.Join(args, " "), n.Name, err, out)
	}
	return out, nil
}

// importImages loads image archives into every real node's containerd: there is no registry
// to pull them from.
func (c *cluster) importImages(archives []string) error {
	for _, n := range c.host.Nodes {
		for _, a := range archives {
			if _, err := c.ctr(n, "images", "import", a); err != nil {
				return err
			}
		}
	}
	return nil
}

// startKubelet starts node n's kubelet with its own address, ports, directories, cgroup root
// and containerd, authenticating the apiserver by its client certificate.
func (c *cluster) startKubelet(n realNode) error {
	root := c.nodeDir(n, "kubelet")
	for _, d := range []string{root, c.nodeDir(n, "pod-logs"), c.nodeDir(n, "volume-plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: %[1]s
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[2]s
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
cgroupRoot: %[3]s
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[4]s
clusterDNS: [%[5]s]
clusterDomain: %[6]s
resolvConf: %[7]s
podLogsDir: %[8]s
volumePluginDir: %[9]s
nodeStatusUpdateFrequency: 4s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
serializeImagePulls: false
`, n.ip(), filepath.Join(c.dir, "pki", "ca.crt"), n.CgroupRoot, c.containerdSocket(n), dnsIP, clusterDomain,
		c.path("resolv.conf"), c.nodeDir(n, "pod-logs"), c.nodeDir(n, "volume-plugins"))
	file := c.nodeDir(n, "kubelet.yaml")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		return err
	}
	return c.start("kubelet-"+n.Name, filepath.Join(c.kubeBin, "kubelet"),
		"--config="+file, "--kubeconfig="+c.insideKubeconfig(), "--root-dir="+root,
		"--hostname-override="+n.Name, "--node-ip="+n.ip(),
		"--node-labels="+realNodeLabel+"=real")
}

// startRealNodes starts CoreDNS and every real node, imports the images into each node, waits
// until every node is Ready and starts kube-proxy.
func (c *cluster) startRealNodes() error {
	if err := os.WriteFile(c.path("resolv.conf"), []byte("nameserver "+dnsIP+"\n"), 0o644); err != nil {
		return err
	}
	if err := c.startDNS(); err != nil {
		return err
	}
	for _, n := range c.host.Nodes {
		if err := c.makeCgroupRoot(n.CgroupRoot); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if err := c.startContainerd(n); err != nil {
			return err
		}
	}
	if err := c.importImages(append([]string{c.pauseImage}, c.images...)); err != nil {
		return err
	}
	for _, n := range c.host.Nodes {
		if err := c.startKubelet(n); err != nil {
			return err
		}
	}
	cs, err := c.client()
	if err != nil {
		return err
	}
	for _, n := range c.host.Nodes {
		if err := c.wait("kubelet-"+n.Name+" (node Ready)", func() error { return checkNodeReady(cs, n.Name) }); err != nil {
			return err
		}
	}
	// kube-proxy waits for its node to exist.
	return c.startProxy()
}

// netnsHTTP is an HTTP client that reaches into the cluster's network namespace.
func (c *cluster) netnsHTTP() *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: c.dialer()}}
}

// prepareHost records what the real nodes will change on the machine, then makes the
// cluster's network namespace.
func (c *cluster) prepareHost() error {
	name := netnsName(c.dir)
	c.host = &hostState{Netns: name}
	for i, n := range c.realNodes {
		root, err := nodeCgroupRoot(name, n)
		if err != nil {
			return err
		}
		c.host.Nodes = append(c.host.Nodes, realNode{Name: n, Index: i + 1, CgroupRoot: root})
	}
	if err := c.recordHostState(); err != nil {
		return err
	}
	if err := c.makeNetwork(); err != nil {
		return fmt.Errorf("make the cluster's network namespace: %w", err)
	}
	return nil
}

// startForwarder starts `localcluster forward` from 127.0.0.1:port to the apiserver inside the
// cluster's network namespace.
func (c *cluster) startForwarder(port int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	return c.startCommand("apiserver-forward", filepath.Base(self), exec.Command(self, "forward",
		"-netns", netnsPath(c.host.Netns), "-listen", fmt.Sprintf("127.0.0.1:%d", port),
		"-to", fmt.Sprintf("%s:%d", controlPlaneIP, apiServerPort)))
}

// dialer dials the cluster's addresses: inside its network namespace when it has one.
func (c *cluster) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if c.host == nil {
		return (&net.Dialer{}).DialContext
	}
	return netns.Dialer(netnsPath(c.host.Netns))
}

// deleteRealPods deletes every pod of the real nodes at once, and waits (a minute at most)
// until their processes have ended.
func (c *cluster) deleteRealPods(h *hostState) {
	cs, err := c.client()
	if err != nil {
		return
	}
	ctx := context.Background()
	for _, n := range h.Nodes {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			return
		}
		for _, p := range pods.Items {
			_ = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	}
	hs, _ := cgroupHierarchies()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		busy := false
		for _, h2 := range hs {
			for _, n := range h.Nodes {
				busy = busy || hasProcesses(filepath.Join(h2.mount, n.CgroupRoot, "kubepods"))
			}
		}
		if !busy {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	fmt.Println("the real nodes' pods did not all end within a minute: their processes are killed")
}

// hasProcesses reports whether a cgroup or one below it holds a process.
func hasProcesses(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || found || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		data, _ := os.ReadFile(p)
		found = len(strings.TrimSpace(string(data))) > 0
		return nil
	})
	return found
}

// load imports image archives into every real node of a running cluster.
func (c *cluster) load(archives []string) error {
	h, err := c.loadHostState()
	if err != nil {
		return err
	}
	if h == nil {
		return errors.New("the cluster has no real nodes to load images into")
	}
	c.host = h
	if err := c.importImages(archives); err != nil {
		return err
	}
	fmt.Printf("imported %s into nodes %s\n", strings.Join(archives, ", "), strings.Join(nodeNames(h.Nodes), ", "))
	return nil
}

// printNetns prints the path of the cluster's network namespace.
func (c *cluster) printNetns() error {
	h, err := c.loadHostState()
	if err != nil {
		return err
	}
	if h == nil {
		return errors.New("the cluster has no real nodes, and no network namespace")
	}
	fmt.Println(netnsPath(h.Netns))
	return nil
}

func nodeNames(nodes []realNode) []string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return names
}

// realNodeLabel marks the real nodes.
const realNodeLabel = "localcluster.pipeline-operator/node"

// writeSchedulerConfig writes the scheduler's configuration beside simulated nodes: a pod that
// is not pinned to a node goes to a real one, where it really runs (the operator's own pods);
// a pod pinned to a simulated node still goes there.
func (c *cluster) writeSchedulerConfig(kubeconfig string) (string, error) {
	config := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      enabled:
      - name: NodeAffinity
        weight: 50
  pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          preference:
            matchExpressions:
            - key: %s
              operator: In
              values: [real]
`, kubeconfig, realNodeLabel)
	file := c.path("kube-scheduler.yaml")
	return file, os.WriteFile(file, []byte(config), 0o644)
}

// kubelet stops or starts the kubelet of a real node of a running cluster: ["stop"|"start", node].
func (c *cluster) kubelet(args []string) error {
	if len(args) != 2 || (args[0] != "stop" && args[0] != "start") {
		return errors.New("usage: localcluster kubelet stop|start NODE")
	}
	h, err := c.loadHostState()
	if err != nil {
		return err
	}
	if h == nil {
		return errors.New("the cluster has no real nodes")
	}
	c.host = h
	for _, n := range h.Nodes {
		if n.Name != args[1] {
			continue
		}
		name := "kubelet-" + n.Name
		if args[0] == "stop" {
			if pid := c.pid(name); pid != 0 && alive(pid) {
				if err := stop(pid); err != nil {
					return err
				}
			}
			fmt.Printf("stopped %s: its pods keep running, the node will be NotReady\n", name)
			return os.Remove(c.pidFile(name))
		}
		if pid := c.pid(name); pid != 0 && alive(pid) {
			return fmt.Errorf("%s runs already (pid %d)", name, pid)
		}
		return c.startKubelet(n)
	}
	return fmt.Errorf("no real node %s (nodes: %s)", args[1], strings.Join(nodeNames(h.Nodes), ", "))
}
