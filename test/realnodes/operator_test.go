package realnodes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// managerPods are the operator's running pods.
func managerPods(t *testing.T) []corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods(operatorNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "control-plane=controller-manager"})
	if err != nil {
		t.Fatal(err)
	}
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	return running
}

// containerProcesses are the processes on this machine whose program is argv0 and whose
// cgroup is one of the cluster's pods'.
func containerProcesses(argv0 string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.HasPrefix(string(cmdline), argv0+"\x00") {
			continue
		}
		cgroup, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err == nil && strings.Contains(string(cgroup), filepath.Base(netnsPath)) && strings.Contains(string(cgroup), "/kubepods") {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// The manager runs from its image as its Deployment says, on a real node, as the release it was
// built as: its process is not root and its root filesystem is read-only, and yet it serves (it wrote its webhook
// certificates and answered the suite's dry run, TestMain).
func TestManagerRunsAsItsDeployment(t *testing.T) {
	waitOperatorPods(t)
	pods := managerPods(t)
	if len(pods) == 0 {
		t.Fatal("no manager pod runs")
	}
	for _, p := range pods {
		if p.Spec.NodeName != nodeA && p.Spec.NodeName != nodeB {
			t.Errorf("manager pod %s runs on %q, not a real node", p.Name, p.Spec.NodeName)
		}
	}
	// The image's manager is the release's: its start-up line names it.
	logs, err := kubectlRun("-n", operatorNamespace, "logs", pods[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"msg":"starting manager","version":"` + os.Getenv("REALNODES_VERSION") + `"`; !strings.Contains(string(logs), want) {
		t.Errorf("the manager's log has no line %s", want)
	}
	pids := containerProcesses("/manager")
	if len(pids) == 0 {
		t.Fatal("no /manager process runs in a pod of the cluster")
	}
	for _, pid := range pids {
		status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(status)) {
			if f := strings.Fields(line); len(f) == 5 && (f[0] == "Uid:" || f[0] == "Gid:") {
				if slices.Contains(f[1:], "0") {
					t.Errorf("manager process %s runs with %s", pid, strings.TrimSpace(line))
				}
			}
		}
		mounts, err := os.ReadFile(filepath.Join("/proc", pid, "mountinfo"))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(mounts)) {
			if f := strings.Fields(line); len(f) > 5 && f[4] == "/" && !slices.Contains(strings.Split(f[5], ","), "ro") {
				t.Errorf("manager process %s has a writable root filesystem: %s", pid, strings.TrimSpace(line))
			}
		}
	}
}

// Two replicas of the manager elect one leader; when the leader's pod is killed, the other
// takes the lease over.
func TestLeaderElectionAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	if _, err := kubectlRun("-n", operatorNamespace, "scale", "deployment", "--all", "--replicas=2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = kubectlRun("-n", operatorNamespace, "scale", "deployment", "--all", "--replicas=1") })
	var pods []corev1.Pod
	eventually(t, 2*time.Minute, "two manager pods running", func() error {
		if pods = managerPods(t); len(pods) != 2 {
			return errorsf("%d manager pods run", len(pods))
		}
		return nil
	})
	leader := func() (string, error) {
		leases, err := cs.CoordinationV1().Leases(operatorNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for _, l := range leases.Items {
			holder := ptr.Deref(l.Spec.HolderIdentity, "")
			for _, p := range managerPods(t) {
				if strings.HasPrefix(holder, p.Name) {
					return p.Name, nil
				}
			}
		}
		return "", errorsf("no lease is held by a running manager pod")
	}
	var first string
	eventually(t, time.Minute, "a leader", func() (err error) {
		first, err = leader()
		return err
	})
	start := time.Now()
	if err := cs.CoreV1().Pods(operatorNamespace).Delete(ctx, first, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "another leader", func() error {
		now, err := leader()
		if err != nil {
			return err
		}
		if now == first {
			return fmt.Errorf("%s still leads", now)
		}
		t.Logf("%s took the lease over %s after %s was killed", now, time.Since(start).Round(time.Second), first)
		return nil
	})
}
