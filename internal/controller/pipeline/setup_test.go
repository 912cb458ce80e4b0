package pipeline

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// A Pipeline whose passes keep failing is still looked at every maxErrorBackoff at the latest:
// its failover and failback timers are not left waiting for the default 16-minute back-off.
func TestControllerOptionsBoundTheErrorBackoff(t *testing.T) {
	opts := controllerOptions(3)
	if opts.MaxConcurrentReconciles != 3 {
		t.Errorf("MaxConcurrentReconciles %d, want 3", opts.MaxConcurrentReconciles)
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "edge", Name: "face"}}
	first := opts.RateLimiter.When(req)
	last := first
	for range 40 {
		last = opts.RateLimiter.When(req)
	}
	if first >= last || last != maxErrorBackoff {
		t.Errorf("back-off from %s to %s after 40 failures, want it to grow to %s and stop there", first, last, maxErrorBackoff)
	}
}

// readyNode is a ready node with labels; edits change it further.
func readyNode(name string, labels map[string]string, edits ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for _, e := range edits {
		e(n)
	}
	return n
}

// A node event queues a Pipeline whose step (or router) may get a disruption budget only when
// the node could hold the step's pods before the event and not after, or after and not before:
// no other event changes how many nodes can hold them, on which the budget depends.
func TestNodeEventsQueueTheBudgetsTheyMayChange(t *testing.T) {
	ctx := context.Background()
	withBudget := func(name string, edit func(*pipelinev1.Step)) *pipelinev1.Pipeline {
		p := pipelineOnNodes("edge", name, nil, nil, nil, nil)
		p.Spec.Steps[1].Replicas = ptr.To[int32](2)
		if edit != nil {
			edit(&p.Spec.Steps[1])
		}
		return p
	}
	gpu := withBudget("gpu", func(s *pipelinev1.Step) { s.NodeSelector = map[string]string{"pool": "gpu", "zone": "a"} })
	tolerant := withBudget("tolerant", func(s *pipelinev1.Step) {
		s.NodeSelector = map[string]string{"pool": "gpu", "zone": "a"}
		s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	})
	pinned := withBudget("pinned", func(s *pipelinev1.Step) { s.Location = "elsewhere" })
	single := pipelineOnNodes("edge", "single", nil, nil, nil, nil)
	single.Spec.Steps[1].NodeSelector = map[string]string{"pool": "gpu"}
	router := pipelineOnNodes("edge", "router", nil, nil, nil, nil)
	router.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter, Router: &pipelinev1.Router{Replicas: ptr.To[int32](2)}}

	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(gpu, tolerant, pinned, single, router).
		WithIndex(&corev1.Node{}, nodes.IndexHostname, nodes.NodeHostname).
		WithIndex(&pipelinev1.Pipeline{}, indexPipelineNodes, pipelineNodes).
		WithIndex(&pipelinev1.Pipeline{}, indexBudgetNodes, pipelineIndex(budgetNodes)).Build()
	r := &Reconciler{Client: c}

	inPool := map[string]string{"pool": "gpu", "zone": "a"}
	other := map[string]string{"pool": "cpu", "zone": "a"}
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	}
	relabelled := func(n *corev1.Node) { n.Labels = map[string]string{"pool": "gpu", "zone": "a", "rack": "7"} }
	tests := []struct {
		name          string
		before, after *corev1.Node
		want          []string
	}{
		{"a ready node the step's selector picks joins", nil, readyNode("n", inPool), []string{"gpu", "tolerant", "router"}},
		{"a ready node the selector does not pick joins", nil, readyNode("n", other), []string{"router"}},
		{"a node that is not ready yet joins", nil, readyNode("n", inPool, notReady), nil},
		{"a node the selector picks goes", readyNode("n", inPool), nil, []string{"gpu", "tolerant", "router"}},
		{"a node the selector does not pick goes", readyNode("n", other), nil, []string{"router"}},
		{"a node the selector picks is cordoned", readyNode("n", inPool), readyNode("n", inPool, cordoned), []string{"gpu", "tolerant", "router"}},
		{"a node the selector picks is uncordoned", readyNode("n", inPool, cordoned), readyNode("n", inPool), []string{"gpu", "tolerant", "router"}},
		{"a node the selector does not pick is cordoned", readyNode("n", other), readyNode("n", other, cordoned), []string{"router"}},
		{"a node the selector picks stops reporting", readyNode("n", inPool), readyNode("n", inPool, notReady), []string{"gpu", "tolerant", "router"}},
		{"a cordoned node stops reporting", readyNode("n", inPool, cordoned), readyNode("n", inPool, cordoned, notReady), nil},
		{"a node gets the labels the selector picks", readyNode("n", other), readyNode("n", inPool), []string{"gpu", "tolerant"}},
		{"a node loses them", readyNode("n", inPool), readyNode("n", other), []string{"gpu", "tolerant"}},
		{"a node the selector picks gets another label", readyNode("n", inPool), readyNode("n", inPool, relabelled), nil},
		{"a node the selector picks is tainted", readyNode("n", inPool), readyNode("n", inPool, tainted), []string{"gpu", "router"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, req := range r.pipelinesOnNodeEvent(ctx, tt.before, tt.after) {
				got = append(got, req.Name)
			}
			if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(tt.want))) {
				t.Errorf("queued %q, want %q", got, tt.want)
			}
		})
	}

	// A located step is reached by its node's name, whatever its budget.
	var got []string
	for _, req := range r.pipelinesOnNodeEvent(ctx, readyNode("elsewhere", nil, notReady), readyNode("elsewhere", nil)) {
		got = append(got, req.Name)
	}
	if !slices.Equal(slices.Sorted(slices.Values(got)), []string{"pinned", "router"}) {
		t.Errorf("the node of the pinned step queued %q, want the pinned Pipeline and the router's", got)
	}
}

func TestBudgetNodes(t *testing.T) {
	p := pipelineOnNodes("edge", "budgets", nil, nil, nil, nil)
	if got := budgetNodes(p); got != nil {
		t.Errorf("single pods: %q, want none", got)
	}
	p.Spec.Steps[0].Replicas = ptr.To[int32](2)
	p.Spec.Steps[1].Replicas = ptr.To[int32](3)
	p.Spec.Steps[1].NodeSelector = map[string]string{"zone": "a", "pool": "gpu"}
	p.Spec.Steps[2].Replicas = ptr.To[int32](2)
	p.Spec.Steps[2].Location = "n1"
	p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter, Router: &pipelinev1.Router{Replicas: ptr.To[int32](2)}}
	if got, want := budgetNodes(p), []string{anyNode, "pool=gpu"}; !slices.Equal(got, want) {
		t.Errorf("budgetNodes = %q, want %q", got, want)
	}
}
