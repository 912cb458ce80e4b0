// Command localcluster runs a Kubernetes cluster on this machine for development, demos and
// end-to-end tests: etcd, kube-apiserver, kube-controller-manager and kube-scheduler, with kwok
// simulating nodes and, with -real-nodes (as root), real nodes: a kubelet and a containerd each,
// running real containers with runc and CNI, with kube-proxy and CoreDNS. It runs in the
// background; its state, kubeconfig and logs live in one directory (default .local).
//
// A cluster with real nodes lives in a network namespace of its own, with no link or route to
// the machine's network: its pods, nodes and Services are reachable only inside it, the
// apiserver also through a forwarder on loopback (the kubeconfig's address). Its pods' cgroups
// are below the cgroup of the process that started it; down puts back the kernel settings the
// kubelet changes and removes every process, mount, cgroup, namespace and host path it made.
//
//	localcluster up      [flags]          start it (does nothing when it is already running)
//	localcluster down    [flags]          stop exactly the processes it started, and clean up
//	localcluster status  [flags]          say what runs
//	localcluster load    [flags] ARCHIVE  import image archives into every real node
//	localcluster netns   [flags]          print the path of the cluster's network namespace
//	localcluster kubelet [flags] stop|start NODE   stop a real node's kubelet (its pods keep
//	                                      running, the node goes NotReady) or start it again
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	c := &cluster{}
	fs.StringVar(&c.dir, "dir", ".local", "Directory of the cluster's state, kubeconfig and logs.")
	fs.StringVar(&c.kubeBin, "kube-bin", "", "Directory holding kube-apiserver, kube-controller-manager and kube-scheduler.")
	fs.StringVar(&c.etcdBin, "etcd", "", "Path of the etcd binary.")
	fs.StringVar(&c.kwokBin, "kwok", "", "Path of the kwok binary.")
	kwokVersion := fs.String("kwok-version", "", "Version of the kwok module whose stage files simulate nodes and pods.")
	fs.StringVar(&c.egressSocket, "egress-socket", "",
		"Unix socket of an HTTP CONNECT proxy through which kube-apiserver reaches the cluster network "+
			"(webhooks, aggregated APIs): Service addresses are not reachable here, the proxy decides where they lead.")
	nodes := fs.String("nodes", "xx-test-node236,xx-test-node239,node-1,node-2", "Comma-separated names of the simulated nodes.")
	realNodes := fs.String("real-nodes", "", "Comma-separated names of the real nodes (root only; simulated without root).")
	fs.StringVar(&c.containerdBin, "containerd", "", "Directory holding containerd, containerd-shim-runc-v2 and ctr (real nodes).")
	fs.StringVar(&c.cniBin, "cni", "", "Directory holding the CNI plugins (real nodes).")
	fs.StringVar(&c.corednsBin, "coredns", "", "Path of the coredns binary (real nodes).")
	fs.StringVar(&c.pauseImage, "pause-image", "", "Archive of the pods' sandbox image "+sandboxImage+" (real nodes).")
	images := fs.String("images", "", "Comma-separated image archives every real node imports.")
	if cmd == "forward" {
		// It serves until it is stopped, or fails.
		fmt.Fprintf(os.Stderr, "localcluster forward: %v\n", forward(os.Args[2:]))
		os.Exit(1)
	}
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	c.nodes = splitList(*nodes)
	c.realNodes = splitList(*realNodes)
	c.images = splitList(*images)
	if cmd == "up" {
		stages, logsCRD, err := kwokFiles(*kwokVersion)
		if err != nil {
			fmt.Fprintf(os.Stderr, "localcluster: %v\n", err)
			os.Exit(1)
		}
		c.kwokStages, c.kwokLogsCRD = stages, logsCRD
	}

	var err error
	switch cmd {
	case "up":
		err = c.up()
	case "down":
		err = c.down()
	case "status":
		err = c.status()
	case "load":
		err = c.load(fs.Args())
	case "netns":
		err = c.printNetns()
	case "kubelet":
		err = c.kubelet(fs.Args())
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

// kwokFiles finds the files kwok ships in its module: the pod stage files (pods become Ready,
// complete and go away when deleted) and the CRD of its Logs. The nodes' stages are this
// command's own (node-stages.yaml).
func kwokFiles(version string) (stages []string, logsCRD string, err error) {
	if version == "" {
		return nil, "", errors.New("-kwok-version is required")
	}
	out, err := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/kwok@"+version).Output()
	if err != nil {
		return nil, "", fmt.Errorf("locate the kwok %s module: %w", version, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, "", fmt.Errorf("locate the kwok %s module: %s", version, out)
	}
	for _, s := range []string{"pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml"} {
		stages = append(stages, filepath.Join(mod.Dir, "kustomize", "stage", s))
	}
	logsCRD = filepath.Join(mod.Dir, "kustomize", "crd", "bases", "kwok.x-k8s.io_logs.yaml")
	for _, f := range append([]string{logsCRD}, stages...) {
		if _, err := os.Stat(f); err != nil {
			return nil, "", err
		}
	}
	return stages, logsCRD, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localcluster up|down|status|load|netns|kubelet [-dir DIR] [-kube-bin DIR] [-etcd PATH] [-kwok PATH] [-nodes a,b] "+
		"[-real-nodes c,d -containerd DIR -cni DIR -coredns PATH -pause-image ARCHIVE -images ARCHIVE,...] [-egress-socket PATH] [ARCHIVE...]")
	os.Exit(2)
}
