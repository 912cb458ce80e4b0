package pipeline

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// reconcileNetworkPolicy makes the NetworkPolicy of the Pipeline's inner steps
// (resources.StepsNetworkPolicy) exist as the spec says, and deletes it once the Pipeline has no
// inner step (one step in mode Chain) or the operator makes none (DisableStepNetworkPolicies).
// The deletion looks for the policy by name on every pass, a cached read that costs no request:
// the stale pass runs only after a change of the spec, and turning the policies off changes no
// spec.
func (r *Reconciler) reconcileNetworkPolicy(ctx context.Context, s *scope) error {
	p := s.pipeline
	np := &networkingv1.NetworkPolicy{}
	if desired := resources.StepsNetworkPolicy(p); desired != nil && !r.DisableStepNetworkPolicies {
		_, err := r.applyChild(ctx, s, np, desired)
		return err
	}
	key := client.ObjectKey{Namespace: p.Namespace, Name: resources.StepsNetworkPolicyName(p)}
	owned, err := r.applier().Child(ctx, p, key, np)
	if err != nil {
		return fmt.Errorf("get network policy: %w", err)
	}
	if !owned {
		// None, or someone else's of that name: left alone.
		return nil
	}
	uid := np.GetUID()
	return r.applier().Delete(ctx, p, np, "NetworkPolicy", client.Preconditions{UID: &uid})
}
