package faults

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

const (
	// steps of every Pipeline of the suite.
	steps = 3
	// burstWriters create the Pipelines of a burst in parallel.
	burstWriters = 8
	// burstSize is the number of Pipelines of a burst.
	burstSize = 100
)

// The nodes the pinned Pipelines of the suite run on, and fail over between; the simulated
// controllers keep them Ready.
var faultNodes = []string{"faults-node-a", "faults-node-b"}

// routerImage is the router image the operator of the suite is given.
const routerImage = "registry.faults.invalid/pipeline-operator:v0"

// newPipeline is the i-th Pipeline of a case: newPlainPipeline, and of every four from the
// second on, one enables the router, one autoscales its second step and one pins its first step
// to a node with a fallback.
func newPipeline(ns string, i int) *pipelinev1.Pipeline {
	p := newPlainPipeline(ns, i)
	switch i % 4 {
	case variantRouter:
		p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter}
	case variantAutoscaling:
		p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 3}
	case variantFailover:
		p.Spec.Steps[0].Location, p.Spec.Steps[0].FallbackLocations = faultNodes[0], faultNodes[1:]
	}
	return p
}

// newPlainPipeline is the i-th Pipeline of a case with NFS storage and three unpinned steps,
// step-1 to step-3, listening on port 9080.
func newPlainPipeline(ns string, i int) *pipelinev1.Pipeline {
	p := &pipelinev1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pipeline-%03d", i), Namespace: ns},
		Spec: pipelinev1.PipelineSpec{
			ModelStorage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS,
				NFS: &pipelinev1.NFSStorage{Server: "nfs.faults.invalid", Path: "/models"}},
		},
	}
	for s := range steps {
		p.Spec.Steps = append(p.Spec.Steps, pipelinev1.Step{Name: fmt.Sprintf("step-%d", s+1), Image: "nginx:latest",
			Model: fmt.Sprintf("model-%d", s+1), Port: ptr.To[int32](9080)})
	}
	return p
}

// stepObjectName is the name of the Deployment and the Service of step i of p.
func stepObjectName(p *pipelinev1.Pipeline, i int) string {
	return p.Name + "-" + p.Spec.Steps[i].Name
}

// The kinds of Pipeline of the suite.
const (
	variantPlain = iota
	variantRouter
	variantAutoscaling
	variantFailover
)

// variant is the kind of Pipeline p is, from its spec.
func variant(p *pipelinev1.Pipeline) int {
	switch {
	case p.Spec.RouterEnabled():
		return variantRouter
	case len(p.Spec.Steps) > 1 && p.Spec.Steps[1].Autoscaling != nil:
		return variantAutoscaling
	case len(p.Spec.Steps) > 0 && len(p.Spec.Steps[0].FallbackLocations) > 0:
		return variantFailover
	}
	return variantPlain
}

// burst creates n Pipelines, build(ns, i) for i from 0, with burstWriters parallel writers, each retrying its create until
// the apiserver takes it (a create whose answer was lost is found to exist), so that a burst
// outlives an outage. created counts the Pipelines stored so far.
type burst struct {
	n       int
	created atomic.Int64
	done    chan error
	started time.Time
	ended   time.Time
}

func startBurst(c client.Client, ns string, n int, build func(ns string, i int) *pipelinev1.Pipeline) *burst {
	b := &burst{n: n, done: make(chan error, 1), started: time.Now()}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, burstWriters)
	for range burstWriters {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := createRetrying(c, build(ns, i)); err != nil {
					errs <- err
					return
				}
				b.created.Add(1)
			}
		})
	}
	go func() {
		wg.Wait()
		b.ended = time.Now()
		close(errs)
		b.done <- <-errs
	}()
	return b
}

// createRetrying creates p, retrying for up to two minutes while the apiserver refuses or
// cannot be reached.
func createRetrying(c client.Client, p *pipelinev1.Pipeline) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.Create(ctx, p.DeepCopy())
		cancel()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("create Pipeline %s: %w", p.Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitCreated waits until the burst has stored at least n Pipelines.
func (b *burst) waitCreated(r *run, n int) {
	r.Helper()
	for deadline := time.Now().Add(2 * time.Minute); b.created.Load() < int64(n); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.Fatalf("only %d of %d Pipelines created", b.created.Load(), n)
		}
	}
}

// wait waits for the burst to end.
func (b *burst) wait(r *run) {
	r.Helper()
	if err := <-b.done; err != nil {
		r.Fatalf("burst: %v", err)
	}
}

// names are the names of the Pipelines 0..n-1 of a case.
func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = newPipeline("", i).Name
	}
	return out
}
