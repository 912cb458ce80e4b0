package main

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

const (
	serviceCIDR        = "10.96.0.0/16"
	serviceAPIServerIP = "10.96.0.1"
	// kwokNodeLabel marks the nodes kwok simulates. kwok watches nodes with this label selector
	// on the apiserver, so a node whose label is removed leaves its watch: kwok stops renewing
	// its lease and its status, as when a real node's kubelet dies, and the node lifecycle
	// controller marks it not ready. Putting the label back brings the node back.
	kwokNodeLabel = "kwok.x-k8s.io/node"
	startTimeout  = 90 * time.Second
)

type cluster struct {
	dir     string
	kubeBin string
	etcdBin string
	kwokBin string
	// kwokStages are kwok's stage files: how simulated pods move through their lives (the
	// nodes' are nodeStages).
	kwokStages []string
	// kwokLogsCRD is the CustomResourceDefinition of kwok's Logs: a Logs object names the file
	// kwok serves as the log of a pod's container.
	kwokLogsCRD string
	nodes       []string
	// egressSocket, when set, is the Unix socket of the HTTP CONNECT proxy kube-apiserver
	// dials for every connection into the cluster network (its "cluster" egress selection).
	egressSocket string

	// realNodes are the names of the nodes run by real kubelets (root only).
	realNodes []string
	// The binaries of the real nodes beyond kubeBin's kubelet and kube-proxy: containerd's
	// directory, the CNI plugins' directory and CoreDNS.
	containerdBin, cniBin, corednsBin string
	// pauseImage is the archive of the sandbox image; images are the other archives every real
	// node imports.
	pauseImage string
	images     []string
	// host is what the real nodes change on the machine, nil for a cluster of simulated nodes.
	host *hostState
}

func (c *cluster) path(parts ...string) string {
	return filepath.Join(append([]string{c.dir}, parts...)...)
}

// nodeStages are the kwok stages of the simulated nodes: Ready with the moment they became so
// as the transition time, and heartbeats that keep it.
//
//go:embed node-stages.yaml
var nodeStages []byte

func (c *cluster) kubeconfig() string         { return c.path("kubeconfig") }
func (c *cluster) logFile(name string) string { return c.path("logs", name+".log") }
func (c *cluster) pidFile(name string) string { return c.path("pids", name+".pid") }

// insideKubeconfig is the kubeconfig of the components inside the cluster's network namespace:
// the apiserver's own address there. Without real nodes it is kubeconfig.
func (c *cluster) insideKubeconfig() string {
	if c.host == nil {
		return c.kubeconfig()
	}
	return c.path("kubeconfig-inside")
}

// stopOrder stops the components that depend on others first: nothing may schedule or
// replace a pod once the real nodes' pods are being deleted, and the nodes stop before the
// apiserver. A name ending in "-" is a prefix (one component per real node).
var stopOrder = []string{"operator", "kube-scheduler", "kube-controller-manager", "kubelet-", "kube-proxy", "coredns", "kwok",
	"containerd-", "kube-apiserver", "etcd", "apiserver-forward"}

func (c *cluster) up() error {
	if c.healthy() {
		fmt.Printf("local control plane already running; kubeconfig: %s\n", c.kubeconfig())
		return nil
	}
	if h, _ := c.loadHostState(); c.anyRunning() || h != nil {
		// Partly running, or real nodes that never went down: what they changed on the machine
		// is put back from their record before anything is recorded again.
		fmt.Println("local control plane is partly running or did not go down: stopping it before starting again")
		if err := c.down(); err != nil {
			return err
		}
	}
	if err := c.checkBinaries(); err != nil {
		return err
	}
	err := c.bringUp()
	if err != nil && c.host != nil {
		// Half a cluster of real nodes would leave the machine changed.
		fmt.Println("start-up failed: stopping what started and putting the machine back")
		if downErr := c.down(); downErr != nil {
			err = errors.Join(err, downErr)
		}
	}
	return err
}

// bringUp starts every component, in order, each once the one before answers.
func (c *cluster) bringUp() error {
	for _, d := range []string{"logs", "pids", "etcd"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return err
		}
	}
	pk := &pki{dir: c.path("pki")}
	if err := pk.generate(); err != nil {
		return fmt.Errorf("generate certificates: %w", err)
	}
	if len(c.realNodes) > 0 {
		if err := c.prepareHost(); err != nil {
			return err
		}
	}
	ports, err := freePorts(6)
	if err != nil {
		return err
	}
	etcdPort, peerPort, apiPort, kcmPort, schedPort, kwokPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	start := time.Now()

	etcdURL, err := c.startEtcd(etcdPort, peerPort)
	if err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	if c.host != nil {
		// The apiserver listens inside the cluster's network namespace; kubectl reaches it
		// through the forwarder on apiPort.
		if err := c.startForwarder(apiPort); err != nil {
			return err
		}
	}
	if err := c.startAPIServer(pk, etcdURL, apiPort); err != nil {
		return err
	}
	if err := c.startControllers(pk, kcmPort, schedPort); err != nil {
		return err
	}
	if err := c.installKwokLogsCRD(); err != nil {
		return err
	}
	if err := c.startKwok(kwokPort); err != nil {
		return err
	}
	cs, err := c.client()
	if err != nil {
		return err
	}
	if err := c.createNodes(cs); err != nil {
		return err
	}
	if c.host != nil {
		if err := c.startRealNodes(); err != nil {
			return err
		}
	}
	if err := c.wait("kube-controller-manager (default service account)", func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	fmt.Printf("local control plane up in %s: %s, simulated nodes %s\nkubeconfig: %s\nlogs: %s\n",
		time.Since(start).Round(time.Second), server, strings.Join(c.nodes, ", "), c.kubeconfig(), c.path("logs"))
	if c.host != nil {
		fmt.Printf("real nodes %s in network namespace %s (%s); enter it with: nsenter --net=%s\n",
			strings.Join(c.realNodes, ", "), c.host.Netns, netnsPath(c.host.Netns), netnsPath(c.host.Netns))
	}
	return nil
}

// checkBinaries checks that every binary and image the cluster runs is there. Without root, the
// real nodes asked for are simulated instead.
func (c *cluster) checkBinaries() error {
	if msg := c.simulateWithoutRoot(os.Geteuid()); msg != "" {
		fmt.Println(msg)
	}
	bins := []string{filepath.Join(c.kubeBin, "kube-apiserver"), filepath.Join(c.kubeBin, "kube-controller-manager"),
		filepath.Join(c.kubeBin, "kube-scheduler"), c.etcdBin, c.kwokBin}
	if len(c.realNodes) > 0 {
		bins = append(bins, filepath.Join(c.kubeBin, "kubelet"), filepath.Join(c.kubeBin, "kube-proxy"),
			filepath.Join(c.containerdBin, "containerd"), filepath.Join(c.containerdBin, "ctr"), filepath.Join(c.cniBin, "bridge"),
			c.corednsBin, c.pauseImage, runcBin)
		bins = append(bins, c.images...)
	}
	for _, bin := range bins {
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("missing %s (make local-up builds it): %w", bin, err)
		}
	}
	return nil
}

// simulateWithoutRoot makes the real nodes asked for simulated ones when the user (euid) is not
// root, and says so.
func (c *cluster) simulateWithoutRoot(euid int) string {
	if len(c.realNodes) == 0 || euid == 0 {
		return ""
	}
	msg := fmt.Sprintf("real nodes need root (a network namespace, cgroups, containers): nodes %s are simulated by kwok instead",
		strings.Join(c.realNodes, ", "))
	c.nodes, c.realNodes = append(c.realNodes, c.nodes...), nil
	return msg
}

func (c *cluster) startEtcd(port, peerPort int) (string, error) {
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	if err := c.start("etcd", c.etcdBin,
		"--name=local", "--data-dir="+c.path("etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=local="+peerURL, "--unsafe-no-fsync=true", "--log-level=warn",
	); err != nil {
		return "", err
	}
	return etcdURL, c.waitHTTP("etcd", etcdURL+"/health", nil)
}

func (c *cluster) startAPIServer(pk *pki, etcdURL string, port int) error {
	if err := c.writeKubeconfig(pk, c.kubeconfig(), fmt.Sprintf("https://127.0.0.1:%d", port)); err != nil {
		return err
	}
	address := "127.0.0.1"
	if c.host != nil {
		address, port = controlPlaneIP, apiServerPort
		if err := c.writeKubeconfig(pk, c.insideKubeconfig(), fmt.Sprintf("https://%s:%d", address, port)); err != nil {
			return err
		}
	}
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + address, "--advertise-address=" + address, fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file=" + pk.path("apiserver.crt"), "--tls-private-key-file=" + pk.path("apiserver.key"),
		"--client-ca-file=" + pk.path("ca.crt"),
		"--service-account-key-file=" + pk.path("sa.pub"), "--service-account-signing-key-file=" + pk.path("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--authorization-mode=RBAC", "--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true", "--profiling=false", "--cert-dir=" + pk.dir,
		// Pod logs come from the node's InternalIP (kwok's server on loopback, or a real
		// kubelet's address), never from the node's name looked up in DNS. Their serving
		// certificates are their own, which kube-apiserver accepts without
		// --kubelet-certificate-authority; a real kubelet checks the apiserver's client one.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate=" + pk.path("admin.crt"), "--kubelet-client-key=" + pk.path("admin.key"),
	}
	if c.host == nil {
		// Loopback cannot be the endpoint of the kubernetes Service; nothing here needs it.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	if c.egressSocket != "" {
		file, err := c.writeEgressSelector()
		if err != nil {
			return err
		}
		args = append(args, "--egress-selector-config-file="+file)
	}
	if err := c.start("kube-apiserver", filepath.Join(c.kubeBin, "kube-apiserver"), args...); err != nil {
		return err
	}
	cs, err := c.client()
	if err != nil {
		return err
	}
	return c.wait("kube-apiserver", func() error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	})
}

// writeEgressSelector writes kube-apiserver's egress selector configuration: connections into
// the cluster network go through the HTTP CONNECT proxy on c.egressSocket.
func (c *cluster) writeEgressSelector() (string, error) {
	file := c.path("egress-selector.yaml")
	config := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, c.egressSocket)
	return file, os.WriteFile(file, []byte(config), 0o644)
}

func (c *cluster) startControllers(pk *pki, kcmPort, schedPort int) error {
	kc := c.insideKubeconfig()
	if err := c.start("kube-controller-manager", filepath.Join(c.kubeBin, "kube-controller-manager"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", kcmPort),
		"--leader-elect=false", "--use-service-account-credentials=false",
		"--service-account-private-key-file="+pk.path("sa.key"), "--root-ca-file="+pk.path("ca.crt"),
		"--service-cluster-ip-range="+serviceCIDR, "--profiling=false",
		// A node whose heartbeat stops is marked not ready after 20 s instead of 50 s, so that
		// the failover tests do not wait for minutes.
		"--node-monitor-grace-period=20s", "--node-monitor-period=2s",
	); err != nil {
		return err
	}
	schedArgs := []string{"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", schedPort), "--leader-elect=false", "--profiling=false"}
	if c.host != nil {
		file, err := c.writeSchedulerConfig(kc)
		if err != nil {
			return err
		}
		schedArgs = append(schedArgs, "--config="+file)
	}
	if err := c.start("kube-scheduler", filepath.Join(c.kubeBin, "kube-scheduler"), schedArgs...); err != nil {
		return err
	}
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: c.dialer(),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health checks of components this command started
	if err := c.waitHTTP("kube-controller-manager", fmt.Sprintf("https://127.0.0.1:%d/healthz", kcmPort), insecure); err != nil {
		return err
	}
	return c.waitHTTP("kube-scheduler", fmt.Sprintf("https://127.0.0.1:%d/healthz", schedPort), insecure)
}

// startKwok starts kwok, whose server on 127.0.0.1:port plays every node's kubelet: each node
// reports 127.0.0.1 as its InternalIP and port as its kubelet's, so that kube-apiserver reads
// pod logs there, from the files the Logs objects name.
func (c *cluster) startKwok(port int) error {
	cidr := podCIDR
	if c.host != nil {
		cidr = simulatedPodCIDR
	}
	args := []string{
		"--kubeconfig=" + c.insideKubeconfig(), "--manage-all-nodes=false",
		"--manage-nodes-with-label-selector=" + kwokNodeLabel + "=fake",
		"--node-lease-duration-seconds=40", "--cidr=" + cidr,
		"--node-ip=127.0.0.1", fmt.Sprintf("--node-port=%d", port),
		fmt.Sprintf("--server-address=127.0.0.1:%d", port), "--enable-crds=Logs",
	}
	nodeStagesFile := c.path("node-stages.yaml")
	if err := os.WriteFile(nodeStagesFile, nodeStages, 0o644); err != nil {
		return fmt.Errorf("write kwok's node stages: %w", err)
	}
	for _, stage := range append([]string{nodeStagesFile}, c.kwokStages...) {
		args = append(args, "--config="+stage)
	}
	return c.start("kwok", c.kwokBin, args...)
}

// installKwokLogsCRD creates the CustomResourceDefinition of kwok's Logs and waits until it is
// established, so that kwok finds it when it starts.
func (c *cluster) installKwokLogsCRD() error {
	data, err := os.ReadFile(c.kwokLogsCRD)
	if err != nil {
		return fmt.Errorf("read kwok's Logs CRD: %w", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		return fmt.Errorf("decode %s: %w", c.kwokLogsCRD, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig())
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	cs, err := apiextensionsclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	ctx := context.Background()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	return c.wait("CRD "+crd.Name, func() error {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return errors.New("not established")
	})
}

// createNodes registers the simulated nodes and waits until kwok reports them Ready.
func (c *cluster) createNodes(cs kubernetes.Interface) error {
	ctx := context.Background()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	for _, name := range c.nodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
				Labels: map[string]string{
					corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
					"type": "kwok", kwokNodeLabel: "fake",
				},
			},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	return c.wait("kwok (nodes Ready)", func() error {
		for _, name := range c.nodes {
			if err := checkNodeReady(cs, name); err != nil {
				return err
			}
		}
		return nil
	})
}

// checkNodeReady is nil once node name reports Ready.
func checkNodeReady(cs kubernetes.Interface, name string) error {
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !nodeReady(n) {
		return fmt.Errorf("node %s is not Ready", name)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *cluster) writeKubeconfig(pk *pki, file, server string) error {
	read := func(name string) []byte {
		data, _ := os.ReadFile(pk.path(name))
		return data
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: read("ca.crt")}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: read("admin.crt"), ClientKeyData: read("admin.key")}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, file)
}

func (c *cluster) client() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig())
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 5 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// start runs a component in the background, inside the cluster's network namespace when it
// has one.
func (c *cluster) start(name, bin string, args ...string) error {
	return c.startCommand(name, filepath.Base(bin), c.command(bin, args...))
}

// startCommand runs cmd in the background, in its own session so that it outlives this
// command, with its output in logs/NAME.log and its pid and program in pids/NAME.pid.
func (c *cluster) startCommand(name, program string, cmd *exec.Cmd) error {
	log, err := os.OpenFile(c.logFile(name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s did not start: %w", name, err)
	}
	pid := cmd.Process.Pid
	if err := cmd.Process.Release(); err != nil {
		return err
	}
	fmt.Printf("started %s (pid %d)\n", name, pid)
	return os.WriteFile(c.pidFile(name), fmt.Appendf(nil, "%d %s", pid, program), 0o644)
}

// wait polls check until it succeeds, failing early when the component's process has died.
func (c *cluster) wait(name string, check func() error) error {
	component := strings.Fields(name)[0]
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		if last = check(); last == nil {
			return nil
		}
		if pid := c.pid(component); pid != 0 && !alive(pid) {
			return fmt.Errorf("%s exited during start-up; last lines of %s:\n%s", component, c.logFile(component), tail(c.logFile(component), 15))
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("%s did not become ready within %s (%v); last lines of %s:\n%s",
		name, startTimeout, last, c.logFile(component), tail(c.logFile(component), 15))
}

func (c *cluster) waitHTTP(name, url string, hc *http.Client) error {
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: c.dialer()}}
	}
	return c.wait(name, func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return nil
	})
}

func (c *cluster) down() error {
	host, err := c.loadHostState()
	if err != nil {
		return fmt.Errorf("read what the real nodes changed on this machine: %w", err)
	}
	stopped, podsDeleted := 0, false
	for _, name := range c.pidNames() {
		if host != nil && !podsDeleted && strings.HasPrefix(name, "kubelet-") {
			// Pods go first, while their kubelets and containerd can still end them cleanly: a
			// killed shim would leave its containers running and their cgroups busy.
			c.deleteRealPods(host)
			podsDeleted = true
		}
		pid := c.pid(name)
		if pid != 0 && alive(pid) {
			if err := stop(pid); err != nil {
				return fmt.Errorf("stop %s (pid %d): %w", name, pid, err)
			}
			fmt.Printf("stopped %s (pid %d)\n", name, pid)
			stopped++
		}
		_ = os.Remove(c.pidFile(name))
	}
	if err := os.RemoveAll(c.path("etcd")); err != nil {
		return err
	}
	if host != nil {
		if err := c.restoreHost(host); err != nil {
			return fmt.Errorf("put the machine back as it was: %w", err)
		}
		fmt.Printf("removed network namespace %s, the nodes' cgroups and mounts; kernel settings restored\n", host.Netns)
	}
	if stopped == 0 {
		fmt.Println("local control plane was not running")
	}
	return nil
}

func (c *cluster) status() error {
	for _, name := range c.pidNames() {
		state := "stopped"
		if pid := c.pid(name); pid != 0 && alive(pid) {
			state = fmt.Sprintf("running (pid %d)", pid)
		}
		fmt.Printf("%-24s %s\n", name, state)
	}
	if !c.healthy() {
		return errors.New("the local control plane is not running: make local-up starts it")
	}
	cs, err := c.client()
	if err != nil {
		return err
	}
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range nodes.Items {
		ready := "NotReady"
		if nodeReady(&nodes.Items[i]) {
			ready = "Ready"
		}
		fmt.Printf("node %-19s %s\n", nodes.Items[i].Name, ready)
	}
	fmt.Printf("kubeconfig: %s\n", c.kubeconfig())
	return nil
}

// healthy reports whether the control plane answers and all its processes live.
func (c *cluster) healthy() bool {
	names := c.pidNames()
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
		if !slices.Contains(names, name) {
			return false
		}
	}
	for _, name := range names {
		if pid := c.pid(name); name != "operator" && (pid == 0 || !alive(pid)) {
			return false
		}
	}
	cs, err := c.client()
	if err != nil {
		return false
	}
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
	return err == nil
}

func (c *cluster) anyRunning() bool {
	for _, name := range c.pidNames() {
		if pid := c.pid(name); pid != 0 && alive(pid) {
			return true
		}
	}
	return false
}

// pidNames are the components with a pid file, in stop order.
func (c *cluster) pidNames() []string {
	entries, _ := os.ReadDir(c.path("pids"))
	rank := func(name string) int {
		for i, n := range stopOrder {
			if n == name || (strings.HasSuffix(n, "-") && strings.HasPrefix(name, n)) {
				return i + 1
			}
		}
		return 0
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".pid"); ok {
			names = append(names, n)
		}
	}
	sort.SliceStable(names, func(i, j int) bool { return rank(names[i]) < rank(names[j]) })
	return names
}

// pid is the process id recorded for a component, or 0 when there is none or the process now
// under that id is another program (the id was reused): down stops only what up started.
func (c *cluster) pid(name string) int {
	data, err := os.ReadFile(c.pidFile(name))
	if err != nil {
		return 0
	}
	id, program, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	pid, _ := strconv.Atoi(id)
	if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		switch {
		case program != "":
		case name == "operator":
			program = "manager" // bin/manager, started by make demo
		default:
			program = name
		}
		if filepath.Base(argv0) != program {
			return 0
		}
	}
	return pid
}

func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie has exited; its parent has not yet collected it.
	fields := strings.Fields(string(data))
	return len(fields) > 2 && fields[2] != "Z"
}

func stop(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	for range 100 {
		if !alive(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
