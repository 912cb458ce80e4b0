package pipeline

import (
	"context"
	"errors"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// reconcileScaling makes the HorizontalPodAutoscaler and the PodDisruptionBudget of step i exist
// when the spec asks for them; the stale pass deletes them once it no longer does.
func (r *Reconciler) reconcileScaling(ctx context.Context, s *scope, i int) error {
	p := s.pipeline
	if resources.Autoscaling(p, i) != nil {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		ok, err := r.applyChild(ctx, s, hpa, resources.StepHPA(p, i))
		if ok {
			s.obs.Autoscalers[i] = hpa
		}
		if err != nil {
			return err
		}
	}
	budget, err := r.needsDisruptionBudget(ctx, p, i)
	if err != nil {
		return err
	}
	s.budgets[i] = budget
	if budget {
		if _, err := r.applyChild(ctx, s, &policyv1.PodDisruptionBudget{}, resources.StepPDB(p, i)); err != nil {
			return err
		}
	}
	return r.deleteUnneededScaling(ctx, s, i)
}

// needsDisruptionBudget reports whether step i gets a PodDisruptionBudget: the spec allows one
// (resources.NeedsDisruptionBudget: always more than one pod, not pinned by location), and at
// least two nodes that are ready and schedulable for the step's pods (its nodeSelector, its
// tolerations) can hold them. With one such node, a drain of it would wait for ever: the pod it
// evicts can only come back on the node being drained, and the budget allows no second eviction.
// Nodes are read from the cache, which holds them all (stripped to what placement reads).
func (r *Reconciler) needsDisruptionBudget(ctx context.Context, p *pipelinev1.Pipeline, i int) (bool, error) {
	if !resources.NeedsDisruptionBudget(p, i) {
		return false, nil
	}
	step := &p.Spec.Steps[i]
	return r.twoNodesCanHold(ctx, step.NodeSelector, step.Tolerations)
}

// twoNodesCanHold reports whether at least two nodes that are ready and schedulable for pods
// with this node selector and these tolerations exist: where a disruption budget cannot block a
// drain. Nodes are read from the cache, which holds them all (stripped to what placement reads).
func (r *Reconciler) twoNodesCanHold(ctx context.Context, selector map[string]string, tolerations []corev1.Toleration) (bool, error) {
	list := &corev1.NodeList{}
	if err := r.Client.List(ctx, list, client.MatchingLabels(selector)); err != nil {
		return false, fmt.Errorf("list nodes for the disruption budget: %w", err)
	}
	schedulable := 0
	for j := range list.Items {
		if canHold(&list.Items[j], selector, tolerations) {
			schedulable++
		}
	}
	return schedulable >= 2, nil
}

// canHold reports whether node (nil: none) can hold pods with this node selector and these
// tolerations now: it carries the selector's labels and is ready and schedulable for them. The
// nodes twoNodesCanHold counts, and what a node event must change for a budget to change
// (budgetChangedBy).
func canHold(node *corev1.Node, selector map[string]string, tolerations []corev1.Toleration) bool {
	return node != nil && labels.SelectorFromSet(selector).Matches(labels.Set(node.Labels)) &&
		nodes.Classify(node, tolerations).Schedulable()
}

// mayHoldPods reports whether node (nil: none) can hold some pods, whatever their node selector
// and tolerations: it is Ready and not cordoned (canHold is never true otherwise).
func mayHoldPods(node *corev1.Node) bool {
	if node == nil || node.Spec.Unschedulable {
		return false
	}
	ready := nodes.ReadyCondition(node)
	return ready != nil && ready.Status == corev1.ConditionTrue
}

// deleteUnneededScaling deletes the autoscaler and the disruption budget of step i when the spec
// no longer asks for them. The stale pass finds them too, but only when the status says the spec
// changed since the last successful pass; one created by a pass whose successor listed a cache
// that did not hold it yet would otherwise stay, and an autoscaler left behind fights the
// operator over the step's replicas. A cached read by name costs no request.
func (r *Reconciler) deleteUnneededScaling(ctx context.Context, s *scope, i int) error {
	p := s.pipeline
	key := client.ObjectKey{Namespace: p.Namespace, Name: resources.StepObjectName(p, i)}
	var errs []error
	for _, c := range []struct {
		obj    client.Object
		kind   string
		needed bool
	}{
		{&autoscalingv2.HorizontalPodAutoscaler{}, "HorizontalPodAutoscaler", resources.Autoscaling(p, i) != nil},
		{&policyv1.PodDisruptionBudget{}, "PodDisruptionBudget", s.budgets[i]},
	} {
		if c.needed {
			continue
		}
		owned, err := r.applier().Child(ctx, p, key, c.obj)
		if owned {
			err = r.applier().Delete(ctx, p, c.obj, c.kind)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// wantedScalingChildren are the names of the HorizontalPodAutoscalers and PodDisruptionBudgets
// the steps of s's Pipeline need, as this pass decided; the stale pass deletes the others.
func wantedScalingChildren(s *scope) (autoscalers, budgets map[string]bool) {
	p := s.pipeline
	autoscalers, budgets = map[string]bool{}, map[string]bool{}
	for i := range p.Spec.Steps {
		autoscalers[resources.StepObjectName(p, i)] = resources.Autoscaling(p, i) != nil
		budgets[resources.StepObjectName(p, i)] = s.budgets[i]
	}
	return autoscalers, budgets
}

// autoscalerChanged passes the updates of a HorizontalPodAutoscaler that matter to its Pipeline:
// its spec or metadata (drift), and the counts and ScalingActive condition its status reports.
// The metric readings the autoscaler refreshes every few seconds are ignored.
func autoscalerChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok := e.ObjectOld.(*autoscalingv2.HorizontalPodAutoscaler)
		n, ok2 := e.ObjectNew.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok || !ok2 {
			return true
		}
		// The spec itself, not its generation: the apiserver keeps an autoscaler's generation
		// only from Kubernetes 1.37 on.
		return !equality.Semantic.DeepEqual(o.Spec, n.Spec) || !n.DeletionTimestamp.IsZero() ||
			!equality.Semantic.DeepEqual(o.Labels, n.Labels) || !equality.Semantic.DeepEqual(o.Annotations, n.Annotations) ||
			!equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
			o.Status.CurrentReplicas != n.Status.CurrentReplicas || o.Status.DesiredReplicas != n.Status.DesiredReplicas ||
			scalingActive(o) != scalingActive(n)
	}}
}

// scalingActive is the status and message of the ScalingActive condition of hpa.
func scalingActive(hpa *autoscalingv2.HorizontalPodAutoscaler) string {
	for _, c := range hpa.Status.Conditions {
		if c.Type == autoscalingv2.ScalingActive {
			return string(c.Status) + ": " + c.Reason + ": " + c.Message
		}
	}
	return ""
}
