package realnodes

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// When node-b's kubelet stops, node-b goes NotReady and the classify step moves to its fallback
// node-a after failover.afterSeconds; requests are answered again from there. When the kubelet
// is back and node-b has been Ready for failbackAfterSeconds, the step returns.
func TestStepFailsOverWhenItsKubeletStops(t *testing.T) {
	ns := namespace(t, "failover")
	createModels(t, ns)
	p := irisPipeline(ns)
	p.Name = "iris-failover"
	p.Spec.Failover = &pipelinev1.Failover{AfterSeconds: ptr.To[int32](10), Failback: pipelinev1.FailbackAutomatic, FailbackAfterSeconds: ptr.To[int32](10)}
	p.Spec.Steps[1].FallbackLocations = []string{nodeA}
	if err := admin.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: p.Name}
	stepStates(t, key, 3*time.Minute)
	url := "http://" + p.Name + "-router." + ns + ".svc.cluster.local"
	body := `{"inputs":[{"name":"features","datatype":"FP32","shape":[1,4],"data":[6.9,3.1,5.8,2.2]}]}`
	infer(t, url, body)

	stopped := time.Now()
	if out, err := localcluster("kubelet", "stop", nodeB); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_, _ = localcluster("kubelet", "start", nodeB)
		}
	})
	waitStepOn(t, key, "classify", nodeA, 3*time.Minute)
	stepStates(t, key, 3*time.Minute)
	infer(t, url, body)
	t.Logf("failed over to %s and answered %s after node-b's kubelet stopped", nodeA, time.Since(stopped).Round(time.Second))

	started := time.Now()
	if out, err := localcluster("kubelet", "start", nodeB); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	restarted = true
	waitStepOn(t, key, "classify", nodeB, 3*time.Minute)
	stepStates(t, key, 3*time.Minute)
	infer(t, url, body)
	t.Logf("failed back to %s and answered %s after its kubelet started", nodeB, time.Since(started).Round(time.Second))
}

// waitStepOn waits until the step named step reports node as its node.
func waitStepOn(t *testing.T, key types.NamespacedName, step, node string, timeout time.Duration) {
	t.Helper()
	waitStep(t, key, step, "on "+node, timeout, func(s pipelinev1.StepStatus) bool { return s.Node == node })
}

// waitStep waits until the status of the step named step satisfies ok (what says what ok asks).
func waitStep(t *testing.T, key types.NamespacedName, step, what string, timeout time.Duration, ok func(pipelinev1.StepStatus) bool) {
	t.Helper()
	eventually(t, timeout, "step "+step+" of "+key.String()+" "+what, func() error {
		p := &pipelinev1.Pipeline{}
		if err := admin.Get(context.Background(), key, p); err != nil {
			return err
		}
		for _, s := range p.Status.Steps {
			if s.Name == step && ok(s) {
				return nil
			}
			if s.Name == step {
				return errorsf("step %s is on %q (%s %s)", step, s.Node, s.State, s.Message)
			}
		}
		return errorsf("no status of step %s", step)
	})
}
