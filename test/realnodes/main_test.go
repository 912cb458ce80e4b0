// Package realnodes tests the operator, its router and model servers in real containers on
// real nodes: a local cluster (hack/localcluster -real-nodes) of kubelets with containerd,
// runc and CNI, kube-proxy and CoreDNS, in a network namespace of its own. The suite starts
// the cluster, installs the operator from the release manifest (its image made here), runs the
// tests, replaces that operator with the Helm chart and runs `helm test` (checkChart), stops the
// cluster and checks that the machine is as it was. It needs root; without it
// every test is skipped.
//
// make test-realnodes runs it with the environment below.
package realnodes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The suite's environment, set by make test-realnodes.
var (
	// clusterDir is the cluster's directory; localclusterCmd starts it ("up") and stops it
	// ("down"), the same flags following.
	clusterDir      = os.Getenv("REALNODES_DIR")
	localclusterCmd = strings.Fields(os.Getenv("REALNODES_LOCALCLUSTER"))
	installer       = os.Getenv("REALNODES_INSTALLER")
	kubectl         = os.Getenv("KUBECTL")
	modelImage      = os.Getenv("REALNODES_MODELSERVER_IMAGE")
)

// The real nodes of the suite's cluster.
const (
	nodeA = "node-a"
	nodeB = "node-b"
	// operatorNamespace is where the release manifest installs the operator.
	operatorNamespace = "pipeline-operator-system"
)

var (
	cfg   *rest.Config
	cs    *kubernetes.Clientset
	admin client.Client
	// netnsPath is the cluster's network namespace.
	netnsPath string
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("real nodes need root (a network namespace, cgroups, containers): the real-node suite is skipped")
		os.Exit(0)
	}
	if clusterDir == "" || len(localclusterCmd) == 0 || installer == "" || kubectl == "" || modelImage == "" ||
		prometheusBin == "" || prometheusConfigBin == "" || monitoringManifest == "" {
		fmt.Println("REALNODES_DIR, REALNODES_LOCALCLUSTER, REALNODES_INSTALLER, REALNODES_MODELSERVER_IMAGE, REALNODES_PROMETHEUS*, REALNODES_MONITORING and KUBECTL are unset: run make test-realnodes")
		os.Exit(1)
	}
	before, err := readMachine()
	if err != nil {
		fmt.Println("read the machine before the cluster:", err)
		os.Exit(1)
	}
	code := run(m)
	start := time.Now()
	if out, err := localcluster("down"); err != nil {
		fmt.Printf("localcluster down: %v\n%s\n", err, out)
		code = 1
	} else {
		fmt.Printf("the cluster went down in %s\n", time.Since(start).Round(time.Second))
	}
	if left := leftovers(before); len(left) > 0 {
		fmt.Println("the cluster left the machine changed:\n  " + strings.Join(left, "\n  "))
		code = 1
	} else {
		fmt.Println("the machine is as it was: kernel settings, network namespaces, mounts, cgroups, processes and host paths")
	}
	os.Exit(code)
}

// run starts the cluster, installs the operator and runs the tests.
func run(m *testing.M) int {
	start := time.Now()
	if out, err := localcluster("up"); err != nil {
		fmt.Printf("localcluster up: %v\n%s\n", err, out)
		return 1
	}
	fmt.Printf("the cluster came up in %s\n", time.Since(start).Round(time.Second))
	out, err := localcluster("netns")
	if err != nil {
		fmt.Printf("localcluster netns: %v\n%s\n", err, out)
		return 1
	}
	netnsPath = strings.TrimSpace(string(out))
	// The model server's image is imported into the running nodes, as a user adds an image.
	if out, err := localcluster("load", os.Getenv("REALNODES_MODELSERVER_ARCHIVE")); err != nil {
		fmt.Printf("localcluster load: %v\n%s\n", err, out)
		return 1
	}
	if cfg, err = clientcmd.BuildConfigFromFlags("", filepath.Join(clusterDir, "kubeconfig")); err != nil {
		fmt.Println(err)
		return 1
	}
	cs = kubernetes.NewForConfigOrDie(cfg)
	if admin, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		fmt.Println(err)
		return 1
	}
	start = time.Now()
	if err := install(); err != nil {
		fmt.Println("install the operator:", err)
		out, _ := kubectlRun("get", "pods,events", "-A", "-o", "wide")
		fmt.Printf("%s\n", out)
		out, _ = kubectlRun("-n", operatorNamespace, "logs", "deployment/pipeline-operator-controller-manager", "--tail=30")
		fmt.Printf("%s\n", out)
		return 1
	}
	fmt.Printf("the operator was installed and available in %s\n", time.Since(start).Round(time.Second))
	code := m.Run()
	if code == 0 {
		if err := checkChart(); err != nil {
			fmt.Println("the Helm chart:", err)
			code = 1
		}
	}
	return code
}

// localcluster runs a command of hack/localcluster on the suite's cluster, with the flags that
// started it and then args.
func localcluster(cmd string, args ...string) ([]byte, error) {
	all := append(append([]string{localclusterCmd[0], cmd, "-dir", clusterDir}, localclusterCmd[1:]...), args...)
	c := exec.Command(all[0], all[1:]...)
	out, err := c.CombinedOutput()
	return out, err
}

// kubectlRun runs kubectl against the cluster.
func kubectlRun(args ...string) ([]byte, error) {
	c := exec.Command(kubectl, append([]string{"--kubeconfig", filepath.Join(clusterDir, "kubeconfig")}, args...)...)
	out, err := c.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// install applies the release manifest server-side and waits until the operator serves.
func install() error {
	if _, err := kubectlRun("apply", "--server-side", "-f", installer); err != nil {
		return err
	}
	return waitServing()
}

// waitServing waits until the manager's Deployment is available and its webhooks answer (a
// server-side dry run of a Pipeline passes them).
func waitServing() error {
	if _, err := kubectlRun("-n", operatorNamespace, "wait", "--for=condition=Available", "deployment", "--all", "--timeout=180s"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		p := irisPipeline("default")
		if last = admin.Create(ctx, p, client.DryRunAll); last == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("the webhooks did not answer a dry run: %w", last)
}

// irisPipeline is examples/iris/pipeline.yaml in namespace ns.
func irisPipeline(ns string) *pipelinev1.Pipeline {
	p := &pipelinev1.Pipeline{}
	mustDecodeFile(filepath.Join("..", "..", "examples", "iris", "pipeline.yaml"), p)
	p.Namespace = ns
	for i := range p.Spec.Steps {
		p.Spec.Steps[i].Image = modelImage
	}
	return p
}
