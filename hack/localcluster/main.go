// Command localcluster runs a Kubernetes control plane on loopback for development, demos and
// end-to-end tests: etcd, kube-apiserver, kube-controller-manager and kube-scheduler, with kwok
// simulating the nodes. It runs in the background; its state, kubeconfig and logs live in one
// directory (default .local).
//
//	localcluster up     [flags]   start it (does nothing when it is already running)
//	localcluster down   [flags]   stop exactly the processes it started
//	localcluster status [flags]   say what runs
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
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	c.nodes = strings.Split(*nodes, ",")
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

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localcluster up|down|status [-dir DIR] [-kube-bin DIR] [-etcd PATH] [-kwok PATH] [-nodes a,b] [-egress-socket PATH]")
	os.Exit(2)
}
