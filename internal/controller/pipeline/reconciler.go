// Package pipeline holds the Pipeline reconciler: it makes the model storage and the children
// of every step match a Pipeline, places steps on their nodes, and reports what it sees.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
	"github.com/ndsl-cn/pipeline-operator/internal/version"
)

// Finalizer lets the operator delete the cluster-scoped PersistentVolume of a Pipeline, which
// cannot carry an owner reference to it, before the Pipeline goes.
const Finalizer = pipelinev1.CleanupFinalizer

// Reconciler reconciles Pipelines.
type Reconciler struct {
	// Client reads through the manager's cache and writes to the apiserver.
	Client client.Client
	// APIReader reads the apiserver directly, for objects the cache does not hold.
	APIReader client.Reader
	// Recorder records events on Pipelines.
	Recorder events.EventRecorder
	// Metrics records rollout durations and errors; nil records nothing.
	Metrics *metrics.Metrics
	// Now is the clock of the metrics; nil is time.Now.
	Now func() time.Time
	// RouterImage is the image the router of a Pipeline with dataPath.mode Router runs from
	// (the manager's resources.EnvRouterImage); empty deploys no router and says so in the status.
	RouterImage string
	// ClusterDomain is the cluster's DNS domain, in which the operator names the steps'
	// Services (NEXT_STEP_URL, the router's configuration, status.steps[].url); empty is
	// resources.DefaultClusterDomain.
	ClusterDomain resources.ClusterDomain
	// StorageRevocationGrace is how long the steps keep model storage that its
	// ModelStorageClass no longer grants (deleted, or no longer selecting the namespace) before
	// the operator withdraws it; nil is DefaultStorageRevocationGrace, zero withdraws at once.
	StorageRevocationGrace *time.Duration
	// DisableStepNetworkPolicies makes no NetworkPolicy for the steps and deletes those made
	// before, so that any pod may call any step (the manager's --step-network-policies=false).
	// By default every Pipeline with inner steps gets one (resources.StepsNetworkPolicy).
	DisableStepNetworkPolicies bool
	// RecordStorageIdentity records on a Pipeline whose storage identity is pending
	// (pipelinev1.Pipeline.StorageIdentityPending) the identity its conversion data gives, and
	// returns whether it changed the Pipeline (the conversion's, set by the manager); nil leaves
	// such a Pipeline waiting for the storage version migration to record it.
	RecordStorageIdentity func(*pipelinev1.Pipeline) bool
}

// +kubebuilder:rbac:groups=distri-infer.ndsl.cn,resources=pipelines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=distri-infer.ndsl.cn,resources=pipelines/status,verbs=patch
// +kubebuilder:rbac:groups=distri-infer.ndsl.cn,resources=pipelines/finalizers,verbs=update
// +kubebuilder:rbac:groups=distri-infer.ndsl.cn,resources=modelstorageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services;persistentvolumeclaims;persistentvolumes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses;networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes the children of one Pipeline match its spec and records its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	result, err := r.reconcile(ctx, req)
	if err != nil && problem.OnlyConflicts(err) {
		// Writes with a resourceVersion (status, finalizers) fail this way when the Pipeline
		// changed during the pass; the cache's event of the newer version normally starts the
		// next pass first. Not an error worth a back-off.
		log.FromContext(ctx).V(1).Info("A write was refused with a conflict: the pass runs again", "error", err.Error())
		return ctrl.Result{RequeueAfter: conflictRetryInterval}, nil
	}
	return result, err
}

// reconcile is one pass over the Pipeline req names.
func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &pipelinev1.Pipeline{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.ForgetPipeline(req.NamespacedName)
			return ctrl.Result{}, r.deleteOrphanedVolumes(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}

	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, p)
	}

	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		if err := r.patchLocked(ctx, p, func(p *pipelinev1.Pipeline) { controllerutil.AddFinalizer(p, Finalizer) }); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
		return ctrl.Result{}, nil
	}
	if p.StorageIdentityPending() {
		return r.awaitStorageIdentity(ctx, p)
	}

	grant, err := r.checkGrant(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Pausing is the tenant's choice; revoking storage is the administrator's: a paused
	// Pipeline is withdrawn too, by a pass like any other.
	if p.IsPaused() && !grant.withdrawn() {
		return ctrl.Result{RequeueAfter: grant.untilWithdrawal(r.now())}, r.reconcilePaused(ctx, p, grant)
	}

	s := newScope(p)
	s.obs.ClusterDomain = r.ClusterDomain
	s.grant = grant
	if grant != nil {
		s.obs.StorageAccess = &grant.access
		if d := grant.untilWithdrawal(r.now()); d > 0 {
			s.requeueWithin(d)
		}
	}
	if err := r.planRouter(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	r.Metrics.InitFailovers(p)
	err = r.reconcileNormal(ctx, s)
	if s.stepsApplied && s.routerApplied {
		// Every step and the router were placed with the failback asked for; another child's
		// failure does not keep the one-shot request on.
		err = errors.Join(err, r.consumeFailback(ctx, p))
	}
	r.recordCreatedEvent(s)
	s.obs.Err = err
	before := *p.Status.DeepCopy()
	after := status.Compute(s.pipeline, s.obs)
	// The status write carries the resourceVersion the pass started from: it succeeds only when
	// before was the status the apiserver held, so what is derived from the change (events, the
	// rollout histogram) is recorded once per change, never twice from an outdated copy.
	if serr := r.updateStatus(ctx, p, after); serr != nil {
		err = errors.Join(err, serr)
	} else {
		r.Metrics.ObserveStatus(p, before, after, r.now())
		r.recordResumed(p, before)
	}
	r.Metrics.ObserveError(err)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: s.requeueAfter}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// reconcileNormal runs the phases of a pass that brings the children in line with the spec.
// Storage, steps, the Ingress and the steps' NetworkPolicy only name each other, so they are
// written concurrently; stale children are removed once the current ones are in place.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) error {
	var storageErr, ingressErr, policyErr, routerErr error
	var wg sync.WaitGroup
	wg.Go(func() { storageErr = recoverPanic(ctx, "storage", func() error { return r.reconcileStorage(ctx, s) }) })
	wg.Go(func() { ingressErr = recoverPanic(ctx, "ingress", func() error { return r.reconcileIngress(ctx, s) }) })
	wg.Go(func() {
		policyErr = recoverPanic(ctx, "network policy", func() error { return r.reconcileNetworkPolicy(ctx, s) })
	})
	wg.Go(func() { routerErr = recoverPanic(ctx, "router", func() error { return r.reconcileRouter(ctx, s) }) })
	stepsErr := recoverPanic(ctx, "steps", func() error { return r.reconcileSteps(ctx, s) })
	s.stepsApplied = stepsErr == nil
	wg.Wait()
	s.routerApplied = routerErr == nil
	if storageErr != nil || stepsErr != nil || ingressErr != nil || policyErr != nil || routerErr != nil {
		// Keep what the spec no longer describes until what it does describe is in place.
		return errors.Join(storageErr, stepsErr, ingressErr, policyErr, routerErr)
	}
	if !mayHaveStaleChildren(s.pipeline) {
		return nil
	}
	return r.reconcileStale(ctx, s)
}

// updateStatus writes status, signed with the operator's release, when it differs from what p
// holds, and then records the problems that are new since p's status as events. The write
// carries p's resourceVersion: the apiserver refuses it (a conflict) when p is not its latest
// version, so a status is never written, nor an event recorded, from an outdated copy.
func (r *Reconciler) updateStatus(ctx context.Context, p *pipelinev1.Pipeline, status pipelinev1.PipelineStatus) error {
	status.OperatorVersion = version.Version
	if equality.Semantic.DeepEqual(p.Status, status) {
		return nil
	}
	before := p.DeepCopy()
	p.Status = status
	if err := r.Client.Status().Patch(ctx, p, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		p.Status = before.Status
		return fmt.Errorf("update status: %w", err)
	}
	r.recordDegraded(p, before.Status)
	return nil
}

// patchLocked changes p's metadata with edit and sends the change as a merge patch that carries
// p's resourceVersion. A merge patch replaces whole lists: without the lock, a finalizer someone
// else added in between would be dropped.
func (r *Reconciler) patchLocked(ctx context.Context, p *pipelinev1.Pipeline, edit func(*pipelinev1.Pipeline)) error {
	base := p.DeepCopy()
	edit(p)
	return r.Client.Patch(ctx, p, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// recoverPanic runs f and turns a panic in it into an error of the pass. controller-runtime
// recovers panics in Reconcile, not in the goroutines a pass starts, where one would end the
// manager.
func recoverPanic(ctx context.Context, what string, f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			log.FromContext(ctx).Error(fmt.Errorf("%v", v), "Panic recovered", "in", what, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic in %s: %v", what, v)
		}
	}()
	return f()
}

// recordDegraded emits a warning event when p's Degraded condition turned True or changed its
// message since the status before.
func (r *Reconciler) recordDegraded(p *pipelinev1.Pipeline, before pipelinev1.PipelineStatus) {
	now := meta.FindStatusCondition(p.Status.Conditions, pipelinev1.ConditionDegraded)
	if now == nil || now.Status != metav1.ConditionTrue {
		return
	}
	was := meta.FindStatusCondition(before.Conditions, pipelinev1.ConditionDegraded)
	if was != nil && was.Status == now.Status && was.Message == now.Message {
		return
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, now.Reason, "Reconcile", "%s", now.Message)
}
