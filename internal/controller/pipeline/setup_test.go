package pipeline

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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
