package realnodes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// chartRelease is the Helm release checkChart installs.
const chartRelease = "pipeline-operator"

// checkChart replaces the operator of the release manifest with the Helm chart and runs
// `helm test` on it: its pod, of the manager's image with --check-install, runs on a real node
// and asks the chart's webhooks to default and refuse Pipelines. The suite runs it once the tests
// are over: it deletes every Pipeline and the manifest's operator first (one install of the
// cluster-wide objects at a time).
func checkChart() error {
	helm := os.Getenv("HELM")
	if helm == "" {
		return fmt.Errorf("HELM names no helm: run make test-realnodes")
	}
	start := time.Now()
	if _, err := kubectlRun("delete", "pipelines.distri-infer.ndsl.cn", "--all", "-A", "--wait", "--timeout=180s"); err != nil {
		return err
	}
	if _, err := kubectlRun("delete", "-f", installer, "--wait", "--timeout=180s", "--ignore-not-found"); err != nil {
		return err
	}
	run := func(args ...string) (string, error) {
		c := exec.Command(helm, append(args, "--kubeconfig", filepath.Join(clusterDir, "kubeconfig"), "-n", operatorNamespace)...)
		out, err := c.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	if _, err := run("install", chartRelease, filepath.Join("..", "..", "charts", "pipeline-operator"), "--create-namespace",
		"--wait", "--timeout", "4m"); err != nil {
		return err
	}
	out, err := run("test", chartRelease, "--timeout", "4m")
	if err != nil {
		logs, _ := kubectlRun("-n", operatorNamespace, "logs", chartRelease+"-check-install")
		return fmt.Errorf("%w\nthe test pod's log:\n%s", err, logs)
	}
	if !regexp.MustCompile(`(?m)^Phase:\s+Succeeded$`).MatchString(out) {
		return fmt.Errorf("helm test reported no test pod that succeeded:\n%s", out)
	}
	fmt.Printf("the chart replaced the manifest and its helm test passed on a real node in %s:\n%s",
		time.Since(start).Round(time.Second), out)
	_, err = run("uninstall", chartRelease, "--wait", "--timeout", "3m")
	return err
}
