// Package controller holds the Pipeline reconciler: it makes the model storage and the
// Deployment and Service of every step match a Pipeline, and reports what it sees.
package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// Finalizer lets the operator delete the cluster-scoped PersistentVolume of a Pipeline, which
// cannot carry an owner reference to it, before the Pipeline goes.
const Finalizer = "distri-infer.ndsl.cn/cleanup"

// claimRecheckInterval is how often a Pipeline that mounts a claim the operator does not own
// (and so does not watch) looks at it again until it is bound.
const claimRecheckInterval = 15 * time.Second

// conflictRecheckInterval is how often a Pipeline whose child's name is held by someone else's
// object looks again: the operator does not watch objects it does not manage, so it would not
// otherwise see that object go.
const conflictRecheckInterval = 10 * time.Second

// conflictRetryInterval is when a pass whose writes were refused only with conflicts runs again,
// should no event of the newer version start it first.
const conflictRetryInterval = time.Second

// PipelineReconciler reconciles Pipelines.
type PipelineReconciler struct {
	// Client reads through the manager's cache and writes to the apiserver.
	Client client.Client
	// APIReader reads the apiserver directly, for objects the cache does not hold.
	APIReader client.Reader
	// Recorder records events on Pipelines.
	Recorder events.EventRecorder
	// Metrics records rollout durations and errors; nil records nothing.
	Metrics *Metrics
	// Now is the clock of the metrics; nil is time.Now.
	Now func() time.Time
	// RouterImage is the image the router of a Pipeline with spec.router enabled runs from
	// (the manager's EnvRouterImage); empty deploys no router and says so in the status.
	RouterImage string
}

// scope is the state of one pass over one Pipeline. The steps of a pass run concurrently: each
// writes only its own entries of obs, and problems go through addProblem.
type scope struct {
	pipeline    *pipelinev1beta1.Pipeline
	obs         *observed
	podSecurity PodSecurityLevel
	mu          sync.Mutex
	// requeueAfter is when the Pipeline must be looked at again without a watch event; 0 is never.
	requeueAfter time.Duration
	// routerConfigErr is why the router would refuse the configuration the spec gives; nil when
	// it would not, or when the router is disabled (see planRouter).
	routerConfigErr error
	// stepsApplied is true once every step's children were applied in this pass.
	stepsApplied bool
	// created are the children this pass created, by "Kind name", for one event.
	created map[string]runtime.Object
}

func newScope(p *pipelinev1beta1.Pipeline) *scope {
	return &scope{pipeline: p, obs: &observed{
		deployments: make([]*appsv1.Deployment, len(p.Spec.Steps)),
		services:    make([]*corev1.Service, len(p.Spec.Steps)),
		placements:  make([]placement, len(p.Spec.Steps)),
		autoscalers: make([]*autoscalingv2.HorizontalPodAutoscaler, len(p.Spec.Steps)),
	}}
}

func (s *scope) addProblem(reason, format string, args ...any) {
	s.add(problem{reason: reason, message: fmt.Sprintf(format, args...)})
}

func (s *scope) add(pr problem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.obs.problems = append(s.obs.problems, pr)
}

// requeueWithin asks for another pass within d, whatever else of the pass asks for.
func (s *scope) requeueWithin(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.requeueAfter == 0 || d < s.requeueAfter {
		s.requeueAfter = d
	}
}

func (s *scope) recordCreated(kind, name string, obj runtime.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.created == nil {
		s.created = map[string]runtime.Object{}
	}
	s.created[kind+" "+name] = obj
}

// recordCreatedEvent records one event for the children a pass created: a new Pipeline's
// first pass creates all of them, and one event costs the apiserver one write instead of one
// per child. The first child, in name order, is the event's related object, so that events
// of different passes are not folded into one series.
func (r *PipelineReconciler) recordCreatedEvent(s *scope) {
	if len(s.created) == 0 {
		return
	}
	names := make([]string, 0, len(s.created))
	for n := range s.created {
		names = append(names, n)
	}
	sort.Strings(names)
	r.Recorder.Eventf(s.pipeline, s.created[names[0]], corev1.EventTypeNormal, "Created", "Create",
		"Created %s", strings.Join(names, ", "))
}

func (s *scope) conflict(kind, name string) {
	s.addProblem(pipelinev1beta1.ReasonNameConflict,
		"%s %s already exists and does not belong to this Pipeline: rename or delete it", kind, name)
	s.requeueWithin(conflictRecheckInterval)
}

// +kubebuilder:rbac:groups=distri-infer.ndsl.cn,resources=pipelines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=distri-infer.ndsl.cn,resources=pipelines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=distri-infer.ndsl.cn,resources=pipelines/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;persistentvolumeclaims;persistentvolumes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes the children of one Pipeline match its spec and records its status.
func (r *PipelineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	result, err := r.reconcile(ctx, req)
	if err != nil && onlyConflicts(err) {
		// Writes with a resourceVersion (status, finalizers) fail this way when the Pipeline
		// changed during the pass; the cache's event of the newer version normally starts the
		// next pass first. Not an error worth a back-off.
		log.FromContext(ctx).V(1).Info("A write was refused with a conflict: the pass runs again", "error", err.Error())
		return ctrl.Result{RequeueAfter: conflictRetryInterval}, nil
	}
	return result, err
}

// reconcile is one pass over the Pipeline req names.
func (r *PipelineReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &pipelinev1beta1.Pipeline{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forgetPipeline(req.NamespacedName)
			return ctrl.Result{}, r.deleteOrphanedVolumes(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}

	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, p)
	}

	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		if err := r.patchLocked(ctx, p, func(p *pipelinev1beta1.Pipeline) { controllerutil.AddFinalizer(p, Finalizer) }); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
		return ctrl.Result{}, nil
	}

	if isPaused(p) {
		return ctrl.Result{}, r.reconcilePaused(ctx, p)
	}

	s := newScope(p)
	if err := r.planRouter(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	r.Metrics.initFailovers(p)
	err := r.reconcileNormal(ctx, s)
	if s.stepsApplied {
		// Every step was placed with the failback asked for; another child's failure does not
		// keep the one-shot annotation on.
		err = errors.Join(err, r.consumeFailback(ctx, p))
	}
	r.recordCreatedEvent(s)
	s.obs.err = err
	before := *p.Status.DeepCopy()
	after := computeStatus(s.pipeline, s.obs)
	// The status write carries the resourceVersion the pass started from: it succeeds only when
	// before was the status the apiserver held, so what is derived from the change (events, the
	// rollout histogram) is recorded once per change, never twice from an outdated copy.
	if serr := r.updateStatus(ctx, p, after); serr != nil {
		err = errors.Join(err, serr)
	} else {
		r.Metrics.observeStatus(p, before, after, r.now())
		r.recordResumed(p, before)
	}
	r.Metrics.observeError(err)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: s.requeueAfter}, nil
}

// planRouter decides, once per pass, what the pass does with the router of s.pipeline. It
// validates the router's configuration (s.routerConfigErr). A Pipeline that enables the router is
// reconciled as if it did not (s.pipeline becomes such a copy, and Degraded says why), its entry
// staying on the first step, when the operator has no router image (a router deployed earlier is
// removed: it would run a configuration that no longer follows the spec), and when the router
// would refuse the configuration while no router of the Pipeline runs yet (one that runs is left
// as it is, see reconcileRouter).
func (r *PipelineReconciler) planRouter(ctx context.Context, s *scope) error {
	p := s.pipeline
	if !routerEnabled(p) {
		return nil
	}
	var why problem
	if r.RouterImage == "" {
		why = problem{reason: pipelinev1beta1.ReasonRouterImageUnknown, message: fmt.Sprintf(
			"router: the operator knows no router image (its %s environment variable is empty): the router is not deployed "+
				"and the entry stays on the first step", EnvRouterImage)}
	} else {
		if s.routerConfigErr = desiredRouterConfig(p).Validate(); s.routerConfigErr == nil {
			return nil
		}
		d := &appsv1.Deployment{}
		owned, err := r.cachedChild(ctx, p, types.NamespacedName{Namespace: p.Namespace, Name: routerObjectName(p)}, d)
		if err != nil {
			return fmt.Errorf("get router deployment: %w", err)
		}
		if owned && isRouterObject(d) {
			return nil
		}
		why = problem{reason: pipelinev1beta1.ReasonRouterConfigInvalid, message: fmt.Sprintf(
			"router: its configuration is refused: %v: the router is not deployed and the entry stays on the first step", s.routerConfigErr)}
	}
	view := p.DeepCopy()
	view.Spec.Router.Enabled = false
	s.pipeline = view
	s.add(why)
	return nil
}

func (r *PipelineReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// reconcileNormal runs the phases of a pass that brings the children in line with the spec.
// Storage, steps and the Ingress only name each other, so they are written concurrently;
// stale children are removed once the current ones are in place.
func (r *PipelineReconciler) reconcileNormal(ctx context.Context, s *scope) error {
	var storageErr, ingressErr, routerErr error
	var wg sync.WaitGroup
	wg.Go(func() { storageErr = recoverPanic(ctx, "storage", func() error { return r.reconcileStorage(ctx, s) }) })
	wg.Go(func() { ingressErr = recoverPanic(ctx, "ingress", func() error { return r.reconcileIngress(ctx, s) }) })
	wg.Go(func() { routerErr = recoverPanic(ctx, "router", func() error { return r.reconcileRouter(ctx, s) }) })
	stepsErr := recoverPanic(ctx, "steps", func() error { return r.reconcileSteps(ctx, s) })
	s.stepsApplied = stepsErr == nil
	wg.Wait()
	if storageErr != nil || stepsErr != nil || ingressErr != nil || routerErr != nil {
		// Keep what the spec no longer describes until what it does describe is in place.
		return errors.Join(storageErr, stepsErr, ingressErr, routerErr)
	}
	if !mayHaveStaleChildren(s.pipeline) {
		return nil
	}
	return r.reconcileStale(ctx, s)
}

// mayHaveStaleChildren reports whether children of an earlier spec may still exist: the last
// successful pass was for another generation, or made children with other names. A converged
// Pipeline skips the search for stale children, which lists every child kind in the namespace;
// so does a new one, whose spec never changed and so never named other children.
func mayHaveStaleChildren(p *pipelinev1beta1.Pipeline) bool {
	st := p.Status
	if p.Generation == 1 && st.ObservedGeneration == 0 {
		return false
	}
	if st.ObservedGeneration != p.Generation || len(st.DetailPhase.StepsPhase) != len(p.Spec.Steps) ||
		st.PVCName != claimName(p) || (ownsVolume(p) && st.PVName != pvName(p)) || (!ownsVolume(p) && st.PVName != "") ||
		(ingressSpec(p) == nil) != (st.DetailPhase.IngressPhase == "") ||
		routerEnabled(p) != (st.DetailPhase.RouterPhase != "") {
		return true
	}
	for i, step := range st.DetailPhase.StepsPhase {
		if step.DeploymentName != stepObjectName(p, i) {
			return true
		}
	}
	return false
}

// reconcileStorage makes the model PersistentVolume and claim exist, or finds the user's claim.
func (r *PipelineReconciler) reconcileStorage(ctx context.Context, s *scope) error {
	p := s.pipeline
	if ownsStorage(p) {
		// The volume and the claim name each other; they are written together.
		var pvErr error
		var wg sync.WaitGroup
		// Waits also when the claim's write panics: no goroutine of a pass outlives it.
		defer wg.Wait()
		if ownsVolume(p) {
			wg.Go(func() {
				pvErr = recoverPanic(ctx, "persistent volume", func() error { return r.reconcileVolume(ctx, s) })
			})
		}
		pvc := &corev1.PersistentVolumeClaim{}
		ok, err := r.applyChild(ctx, s, pvc, desiredPVC(p))
		if ok {
			s.obs.pvc = pvc
		}
		wg.Wait()
		return errors.Join(pvErr, err)
	}

	pvc := &corev1.PersistentVolumeClaim{}
	// existingClaim: the claim is the user's; the cache does not hold it.
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: claimName(p)}, pvc)
	switch {
	case apierrors.IsNotFound(err):
		s.addProblem(pipelinev1beta1.ReasonClaimNotFound,
			"PersistentVolumeClaim %s named by modelStorage.claimName does not exist in namespace %s", claimName(p), p.Namespace)
		s.requeueWithin(claimRecheckInterval)
	case err != nil:
		return fmt.Errorf("get claim %s: %w", claimName(p), err)
	default:
		s.obs.pvc = pvc
		if pvc.Status.Phase != corev1.ClaimBound {
			s.requeueWithin(claimRecheckInterval)
		}
	}
	return nil
}

// reconcileVolume makes the model PersistentVolume exist as the spec says. A Released volume
// was bound to a claim that is gone (deleted by someone, or left by an earlier Pipeline of the
// same name whose finalizer was removed by hand): it can never bind to the current claim, and
// is not taken over. It is deleted (its reclaim policy is Retain: the model data stays where
// it is), and its deletion event starts the pass that makes a new one.
func (r *PipelineReconciler) reconcileVolume(ctx context.Context, s *scope) error {
	pv := &corev1.PersistentVolume{}
	ok, err := r.applyChild(ctx, s, pv, desiredPV(s.pipeline))
	switch {
	case err != nil || !ok:
		return err
	case !pv.DeletionTimestamp.IsZero():
		return nil
	case pv.Status.Phase == corev1.VolumeReleased:
		r.Recorder.Eventf(s.pipeline, pv, corev1.EventTypeNormal, "VolumeReleased", "Delete",
			"PersistentVolume %s is Released: the claim it was bound to (uid %s) is gone, so it cannot bind again; "+
				"it is deleted and made anew (reclaim policy Retain: the model data is not touched)",
			pv.Name, ptr.Deref(pv.Spec.ClaimRef, corev1.ObjectReference{}).UID)
		// Only the version seen Released: one changed since (re-bound by an administrator) is
		// refused with a conflict, and the pass runs again from the newer version.
		return r.deleteChild(ctx, s.pipeline, pv, "PersistentVolume",
			client.Preconditions{UID: &pv.UID, ResourceVersion: &pv.ResourceVersion})
	}
	s.obs.pv = pv
	return nil
}

// reconcileSteps makes the Deployment and Service of every step exist as the spec says.
func (r *PipelineReconciler) reconcileSteps(ctx context.Context, s *scope) error {
	level, err := r.podSecurityLevel(ctx, s.pipeline.Namespace)
	if err != nil {
		return err
	}
	s.podSecurity = level
	// Steps are independent of each other: their writes go out together, so a pass takes
	// the time of one step, not of all of them.
	errs := make([]error, len(s.pipeline.Spec.Steps))
	var wg sync.WaitGroup
	for i := range s.pipeline.Spec.Steps {
		wg.Go(func() {
			err := recoverPanic(ctx, "step "+stepName(s.pipeline, i), func() error { return r.reconcileStep(ctx, s, i) })
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", stepLabel(s.pipeline, i), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// reconcileStep makes the Deployment and Service of step i, and its autoscaler and disruption
// budget when it needs them, exist as the spec says.
func (r *PipelineReconciler) reconcileStep(ctx context.Context, s *scope, i int) error {
	p := s.pipeline
	pl, err := r.placeStep(ctx, s, i)
	if err != nil {
		return err
	}
	d := &appsv1.Deployment{}
	ok, updated, err := r.applyExistingChild(ctx, s, d, desiredStepDeployment(p, i, s.podSecurity, pl.decision.Node))
	if err != nil {
		return err
	}
	if ok {
		s.obs.deployments[i] = d
		// A move is a Deployment that ran on another node and was written to this one: not a
		// new Deployment, nor one the apiserver already had there.
		if updated && pl.decision.Moved() {
			pl.moved = true
			r.recordMove(s, i, d, pl)
		}
	}
	s.obs.placements[i] = pl
	svc := &corev1.Service{}
	if ok, err = r.applyChild(ctx, s, svc, desiredStepService(p, i)); err != nil {
		return err
	}
	if ok {
		s.obs.services[i] = svc
	}
	return r.reconcileScaling(ctx, s, i)
}

// reconcileIngress makes the Ingress of spec.expose.ingress exist as the spec says; the stale
// pass deletes it once the spec no longer asks for it.
func (r *PipelineReconciler) reconcileIngress(ctx context.Context, s *scope) error {
	if ingressSpec(s.pipeline) == nil {
		return nil
	}
	ing := &networkingv1.Ingress{}
	ok, err := r.applyChild(ctx, s, ing, desiredIngress(s.pipeline))
	if ok {
		s.obs.ingress = ing
	}
	return err
}

// podSecurityLevel is the Pod Security level namespace ns enforces, read from the cached
// namespace metadata (the apiserver when the cache does not hold the namespace yet).
func (r *PipelineReconciler) podSecurityLevel(ctx context.Context, ns string) (PodSecurityLevel, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	err := r.Client.Get(ctx, client.ObjectKey{Name: ns}, m)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, client.ObjectKey{Name: ns}, m)
	}
	if err != nil {
		return "", fmt.Errorf("get namespace %s: %w", ns, err)
	}
	return namespacePodSecurity(m.GetLabels()), nil
}

// reconcileStale deletes the children the spec no longer describes: steps that were removed
// or renamed, autoscalers and disruption budgets the steps no longer need, storage that was
// replaced, an Ingress the spec dropped and a router it disabled.
func (r *PipelineReconciler) reconcileStale(ctx context.Context, s *scope) error {
	p := s.pipeline
	wanted := map[string]bool{}
	for i := range p.Spec.Steps {
		wanted[stepObjectName(p, i)] = true
	}
	autoscalers, budgets := wantedScalingChildren(p)
	inNamespace := []client.ListOption{client.InNamespace(p.Namespace), client.MatchingLabels{LabelPipeline: p.Name}}

	var errs []error
	deleteUnwanted := func(list client.ObjectList, kind string, keep func(client.Object) bool, opts ...client.ListOption) {
		if err := r.Client.List(ctx, list, opts...); err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", kind, err))
			return
		}
		for _, obj := range objects(list) {
			if ownedBy(p, obj) && !keep(obj) {
				if err := r.deleteChild(ctx, p, obj, kind); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	// The router's objects are reconcileRouter's to keep or delete (deleteDisabledRouter); by
	// name too, while enabled: a step's object the router took over in this pass may still
	// carry the step's labels in the cache.
	isRouter := func(o client.Object) bool {
		return isRouterObject(o) || (routerEnabled(p) && o.GetName() == routerObjectName(p))
	}
	isStep := func(o client.Object) bool { return wanted[o.GetName()] || isRouter(o) }
	deleteUnwanted(&appsv1.DeploymentList{}, "Deployment", isStep, inNamespace...)
	deleteUnwanted(&corev1.ServiceList{}, "Service", isStep, inNamespace...)
	deleteUnwanted(&autoscalingv2.HorizontalPodAutoscalerList{}, "HorizontalPodAutoscaler",
		func(o client.Object) bool { return autoscalers[o.GetName()] }, inNamespace...)
	deleteUnwanted(&policyv1.PodDisruptionBudgetList{}, "PodDisruptionBudget",
		func(o client.Object) bool { return budgets[o.GetName()] }, inNamespace...)
	deleteUnwanted(&corev1.PersistentVolumeClaimList{}, "PersistentVolumeClaim", func(o client.Object) bool {
		return ownsStorage(p) && o.GetName() == claimName(p)
	}, inNamespace...)
	deleteUnwanted(&networkingv1.IngressList{}, "Ingress", func(o client.Object) bool {
		return ingressSpec(p) != nil && o.GetName() == ingressName(p)
	}, inNamespace...)
	deleteUnwanted(&corev1.PersistentVolumeList{}, "PersistentVolume", func(o client.Object) bool {
		return ownsVolume(p) && o.GetName() == pvName(p)
	}, volumeSelector(p))
	return errors.Join(errs...)
}

// reconcileDelete removes the PersistentVolumes of a Pipeline that is being deleted, then lets
// it go. The garbage collector removes the namespaced children through their owner references.
func (r *PipelineReconciler) reconcileDelete(ctx context.Context, p *pipelinev1beta1.Pipeline) error {
	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		return nil
	}
	status := p.Status.DeepCopy()
	status.Phase = pipelinev1beta1.PipelinePhaseDeleting
	if err := r.updateStatus(ctx, p, *status); err != nil {
		return err
	}

	deleted, err := r.deleteVolumes(ctx, client.ObjectKeyFromObject(p), p)
	if err != nil {
		// The deletion is retried with back-off; the status says why the Pipeline stays.
		err = fmt.Errorf("%w: the Pipeline keeps its finalizer %s until its volumes are deleted; "+
			"remove the cause, or delete the volumes yourself", err, Finalizer)
		status := p.Status.DeepCopy()
		setReconciled(status, p.Generation, err)
		if serr := r.updateStatus(ctx, p, *status); serr != nil && !apierrors.IsConflict(serr) {
			err = errors.Join(err, serr)
		}
		return err
	}

	if err := r.patchLocked(ctx, p, func(p *pipelinev1beta1.Pipeline) { controllerutil.RemoveFinalizer(p, Finalizer) }); err != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	r.Metrics.forgetPipeline(client.ObjectKeyFromObject(p))
	log.FromContext(ctx).Info("Pipeline children released", "persistentVolumes", deleted)
	return nil
}

// deleteOrphanedVolumes deletes the PersistentVolumes of a Pipeline that is gone without its
// finalizer having released them: removed by hand, or deleted by the apiserver in the same
// moment as the finalizer was added (a delete that read the Pipeline before the finalizer was
// there), while a pass that had not seen the delete yet made its volume. A volume is
// cluster-scoped and carries no owner reference, so nothing else would ever delete it. The
// Pipeline is looked up in the apiserver first: one made again under the same name keeps its
// volume.
func (r *PipelineReconciler) deleteOrphanedVolumes(ctx context.Context, key types.NamespacedName) error {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(pipelinev1beta1.GroupVersion.WithKind("Pipeline"))
	if err := r.APIReader.Get(ctx, key, m); !apierrors.IsNotFound(err) {
		return client.IgnoreNotFound(err)
	}
	if _, err := r.deleteVolumes(ctx, key, nil); err != nil {
		return fmt.Errorf("the Pipeline %s is gone: %w", key, err)
	}
	return nil
}

// deleteVolumes deletes the PersistentVolumes labelled for the Pipeline key names and returns
// how many it found. They are listed from the apiserver, not the cache: one created a moment
// ago may not be in the cache yet, and a cluster-scoped volume left behind is one nobody cleans
// up. p, the Pipeline being deleted, receives the events; nil when it is gone.
func (r *PipelineReconciler) deleteVolumes(ctx context.Context, key types.NamespacedName, p *pipelinev1beta1.Pipeline) (int, error) {
	pvs := &corev1.PersistentVolumeList{}
	if err := r.APIReader.List(ctx, pvs, volumesOf(key)); err != nil {
		return 0, fmt.Errorf("list persistent volumes: %w", err)
	}
	var errs []error
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		errs = append(errs, r.deleteChild(ctx, p, pv, "PersistentVolume", client.Preconditions{UID: &pv.UID}))
	}
	return len(pvs.Items), errors.Join(errs...)
}

// updateStatus writes status when it differs from what p holds, and then records the problems
// that are new since p's status as events. The write carries p's resourceVersion: the apiserver
// refuses it (a conflict) when p is not its latest version, so a status is never written, nor
// an event recorded, from an outdated copy.
func (r *PipelineReconciler) updateStatus(ctx context.Context, p *pipelinev1beta1.Pipeline, status pipelinev1beta1.PipelineStatus) error {
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
func (r *PipelineReconciler) patchLocked(ctx context.Context, p *pipelinev1beta1.Pipeline, edit func(*pipelinev1beta1.Pipeline)) error {
	base := p.DeepCopy()
	edit(p)
	return r.Client.Patch(ctx, p, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// onlyConflicts reports whether err, and every error it joins, is a conflict.
func onlyConflicts(err error) bool {
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if !onlyConflicts(inner) {
				return false
			}
		}
		return true
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return onlyConflicts(inner)
		}
	}
	return apierrors.IsConflict(err)
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
func (r *PipelineReconciler) recordDegraded(p *pipelinev1beta1.Pipeline, before pipelinev1beta1.PipelineStatus) {
	now := meta.FindStatusCondition(p.Status.Conditions, pipelinev1beta1.ConditionDegraded)
	if now == nil || now.Status != metav1.ConditionTrue {
		return
	}
	was := meta.FindStatusCondition(before.Conditions, pipelinev1beta1.ConditionDegraded)
	if was != nil && was.Status == now.Status && was.Message == now.Message {
		return
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, now.Reason, "Reconcile", "%s", now.Message)
}

// volumeSelector selects the PersistentVolumes of p.
func volumeSelector(p *pipelinev1beta1.Pipeline) client.MatchingLabels {
	return volumesOf(client.ObjectKeyFromObject(p))
}

// volumesOf selects the PersistentVolumes of the Pipeline key names.
func volumesOf(key types.NamespacedName) client.MatchingLabels {
	return client.MatchingLabels{LabelPipeline: key.Name, LabelPipelineNamespace: key.Namespace}
}

// objects are the items of a list.
func objects(list client.ObjectList) []client.Object {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	out := make([]client.Object, 0, len(items))
	for _, item := range items {
		if obj, ok := item.(client.Object); ok {
			out = append(out, obj)
		}
	}
	return out
}
