// Package operatorcondition holds the controller of the operator's OLM OperatorCondition: it
// reports Upgradeable False while a Pipeline rolls out.
package operatorcondition

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/operator-framework/operator-lib/conditions"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// upgradeableRequest is the only key of the Upgradeable controller's queue: every Pipeline
// event leads to the same decision over all Pipelines.
var upgradeableRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "upgradeable"}}

// maxNamedRollouts is how many rolling-out Pipelines the Upgradeable message names.
const maxNamedRollouts = 10

// UpgradeableReconciler reports to OLM, through the Upgradeable condition of the operator's
// OperatorCondition, whether the operator may be replaced by a new version now: not while a
// Pipeline is rolling out.
type UpgradeableReconciler struct {
	// Client lists Pipelines, from the manager's cache.
	Client client.Client
	// Condition is the Upgradeable condition of the operator's OperatorCondition
	// (conditions.InClusterFactory finds it from OLM's OPERATOR_CONDITION_NAME).
	Condition conditions.Condition

	// last is the condition last read or written, to skip the API when nothing changed.
	last *metav1.Condition
}

// The operator has no rights of its own on OperatorConditions: OLM, which creates the
// operator's OperatorCondition, also grants its ServiceAccounts get, update and patch on that one
// object, by name, in the operator's namespace. Outside OLM the controller does not run.

// Reconcile sets the Upgradeable condition from the Pipelines' status, when it changed.
func (r *UpgradeableReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	list := &pipelinev1.PipelineList{}
	// The Pipelines are only read: the cache's own objects need no copy.
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("list pipelines: %w", err)
	}
	want := upgradeable(list.Items)
	if sameCondition(r.last, &want) {
		return ctrl.Result{}, nil
	}
	if have, err := r.Condition.Get(ctx); err == nil && sameCondition(have, &want) {
		r.last = &want
		return ctrl.Result{}, nil
	}
	if err := r.Condition.Set(ctx, want.Status, conditions.WithReason(want.Reason), conditions.WithMessage(want.Message)); err != nil {
		r.last = nil
		return ctrl.Result{}, fmt.Errorf("set the operator condition %s: %w", want.Type, err)
	}
	r.last = &want
	log.FromContext(ctx).Info("Operator condition set", "type", want.Type, "status", want.Status, "reason", want.Reason, "message", want.Message)
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller: it runs once at start and after every Pipeline
// event, on the leader only.
func (r *UpgradeableReconciler) SetupWithManager(mgr ctrl.Manager, opts ...func(*builder.Builder)) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("operatorcondition").
		Watches(&pipelinev1.Pipeline{}, handler.EnqueueRequestsFromMapFunc(
			func(context.Context, client.Object) []reconcile.Request {
				return []reconcile.Request{upgradeableRequest}
			})).
		// With no Pipeline there is no event: decide once at start all the same.
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(upgradeableRequest)
			return nil
		}))
	for _, o := range opts {
		o(b)
	}
	return b.Complete(r)
}

// upgradeable decides the Upgradeable condition from every Pipeline: False while one is rolling
// out (see rollingOut), True otherwise.
func upgradeable(pipelines []pipelinev1.Pipeline) metav1.Condition {
	var names []string
	for i := range pipelines {
		if rollingOut(&pipelines[i]) {
			names = append(names, pipelines[i].Namespace+"/"+pipelines[i].Name)
		}
	}
	if len(names) == 0 {
		return metav1.Condition{Type: pipelinev1.ConditionUpgradeable, Status: metav1.ConditionTrue,
			Reason: pipelinev1.ReasonNoRollouts, Message: "No Pipeline is rolling out"}
	}
	sort.Strings(names)
	listed := names
	if len(listed) > maxNamedRollouts {
		listed = append(listed[:maxNamedRollouts:maxNamedRollouts], fmt.Sprintf("and %d more", len(names)-maxNamedRollouts))
	}
	noun := "Pipeline is"
	if len(names) > 1 {
		noun = "Pipelines are"
	}
	return metav1.Condition{Type: pipelinev1.ConditionUpgradeable, Status: metav1.ConditionFalse,
		Reason: pipelinev1.ReasonPipelinesRollingOut,
		Message: fmt.Sprintf("%d %s rolling out: %s; the upgrade waits until they are available or failed",
			len(names), noun, strings.Join(listed, ", "))}
}

// rollingOut reports whether p is rolling out: the operator has not reported on its current
// generation yet, or reports it Progressing. A failed Pipeline does not hold an upgrade back
// (the new version may be what it needs), nor does one that is paused or being deleted.
func rollingOut(p *pipelinev1.Pipeline) bool {
	if !p.DeletionTimestamp.IsZero() || p.IsPaused() {
		return false
	}
	c := meta.FindStatusCondition(p.Status.Conditions, pipelinev1.ConditionProgressing)
	return c == nil || c.ObservedGeneration < p.Generation || c.Status == metav1.ConditionTrue
}

// sameCondition reports whether have already says what want says.
func sameCondition(have, want *metav1.Condition) bool {
	return have != nil && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message
}
