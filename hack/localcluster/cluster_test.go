package main

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// Without root, the real nodes asked for are simulated, and the command says so; as root they
// stay real.
func TestRealNodesNeedRoot(t *testing.T) {
	c := &cluster{nodes: []string{"xx-test-node236"}, realNodes: []string{"node-a", "node-b"}}
	msg := c.simulateWithoutRoot(1000)
	if !strings.Contains(msg, "need root") || !strings.Contains(msg, "node-a, node-b") {
		t.Errorf("message %q does not say that nodes node-a and node-b need root", msg)
	}
	if len(c.realNodes) != 0 || !slices.Equal(c.nodes, []string{"node-a", "node-b", "xx-test-node236"}) {
		t.Errorf("without root: real %v, simulated %v; want none real, all three simulated", c.realNodes, c.nodes)
	}

	c = &cluster{nodes: []string{"xx-test-node236"}, realNodes: []string{"node-a"}}
	if msg := c.simulateWithoutRoot(0); msg != "" || !slices.Equal(c.realNodes, []string{"node-a"}) {
		t.Errorf("as root: %q, real nodes %v; want node-a real and nothing said", msg, c.realNodes)
	}
}

// down stops the real nodes' users first (nothing may replace a deleted pod), the nodes before
// the apiserver, and the forwarder last; a node's components sort by their prefix.
func TestStopOrder(t *testing.T) {
	c := &cluster{dir: t.TempDir()}
	if err := os.MkdirAll(c.path("pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"apiserver-forward", "etcd", "containerd-node-b", "kube-apiserver", "kubelet-node-a",
		"kube-scheduler", "coredns", "containerd-node-a", "kube-controller-manager", "kubelet-node-b", "operator"} {
		if err := os.WriteFile(c.pidFile(name), []byte("1 x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"operator", "kube-scheduler", "kube-controller-manager", "kubelet-node-a", "kubelet-node-b", "coredns",
		"containerd-node-a", "containerd-node-b", "kube-apiserver", "etcd", "apiserver-forward"}
	if got := c.pidNames(); !slices.Equal(got, want) {
		t.Errorf("stop order\n%v, want\n%v", got, want)
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/a\040b/c`); got != "/a b/c" {
		t.Errorf("unescapeMount = %q", got)
	}
}
