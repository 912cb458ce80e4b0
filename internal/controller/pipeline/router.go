package pipeline

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// planRouter decides, once per pass, what the pass does with the router of s.pipeline. It
// validates the router's configuration (s.routerConfigErr). A Pipeline that enables the router is
// reconciled as if it did not (s.pipeline becomes such a copy, and Degraded says why), its entry
// staying on the first step, when the operator has no router image (a router deployed earlier is
// removed: it would run a configuration that no longer follows the spec), and when the router
// would refuse the configuration while no router of the Pipeline runs yet (one that runs is left
// as it is, see reconcileRouter).
func (r *Reconciler) planRouter(ctx context.Context, s *scope) error {
	p := s.pipeline
	if !resources.RouterEnabled(p) {
		return nil
	}
	var why problem.Problem
	if r.RouterImage == "" {
		why = problem.Problem{Reason: pipelinev1.ReasonRouterImageUnknown, Message: fmt.Sprintf(
			"router: the operator knows no router image (its %s environment variable is empty): the router is not deployed "+
				"and the entry stays on the first step", resources.EnvRouterImage)}
	} else {
		if s.routerConfigErr = resources.RouterConfig(p, r.ClusterDomain).Validate(); s.routerConfigErr == nil {
			return nil
		}
		d := &appsv1.Deployment{}
		owned, err := r.applier().Child(ctx, p, types.NamespacedName{Namespace: p.Namespace, Name: resources.RouterObjectName(p)}, d)
		if err != nil {
			return fmt.Errorf("get router deployment: %w", err)
		}
		if owned && resources.IsRouterObject(d) {
			return nil
		}
		why = problem.Problem{Reason: pipelinev1.ReasonRouterConfigInvalid, Message: fmt.Sprintf(
			"router: its configuration is refused: %v: the router is not deployed and the entry stays on the first step", s.routerConfigErr)}
	}
	view := p.DeepCopy()
	view.Spec.DataPath.Mode = pipelinev1.DataPathModeChain
	s.pipeline = view
	s.add(why)
	return nil
}

// reconcileRouter makes the router's ConfigMap, Deployment and Service exist as the spec says
// when dataPath.mode is Router, and deletes them once it is not. A router with a location is
// placed as a step is (see place): on location, or on a fallback location while location's
// node is not ready. Without a router image, or with a configuration the router would refuse
// and no router running yet, the pass sees the router disabled (see planRouter).
func (r *Reconciler) reconcileRouter(ctx context.Context, s *scope) error {
	p := s.pipeline
	if !resources.RouterEnabled(p) {
		return r.deleteDisabledRouter(ctx, s)
	}
	what := routerPlaced(p)
	pl, err := r.place(ctx, s, what)
	if err != nil {
		return err
	}
	if s.routerConfigErr != nil {
		// Admission refuses what the router would (the webhook compiles stopWhen); a Pipeline
		// stored without the webhook may still carry it. A router started with it would only
		// crash: the router that runs is left as it is.
		s.addProblem(pipelinev1.ReasonRouterConfigInvalid, "router: its configuration is refused: %v", s.routerConfigErr)
		return r.observeRouter(ctx, s)
	}
	config, err := resources.RouterConfigJSON(p, r.ClusterDomain)
	if err != nil {
		return err
	}
	// The configuration goes first: a router pod that starts before it exists would fail.
	cm := &corev1.ConfigMap{}
	ok, err := r.applyChild(ctx, s, cm, resources.RouterConfigMap(p, config))
	if err != nil || !ok {
		return err
	}
	d := &appsv1.Deployment{}
	pl, ok, err = r.applyPlaced(ctx, s, what, pl, d, resources.RouterDeployment(p, r.RouterImage, config, pl.NodeName))
	s.obs.RouterPlacement = pl
	if ok {
		s.obs.RouterDeployment = d
		r.observeRouterPods(ctx, s, d)
	}
	if err != nil {
		return err
	}
	svc := &corev1.Service{}
	ok, err = r.applyChild(ctx, s, svc, resources.RouterService(p))
	if ok {
		s.obs.RouterService = svc
	}
	if err != nil {
		return err
	}
	return r.reconcileRouterBudget(ctx, s)
}

// reconcileRouterBudget gives the router a disruption budget where it cannot block a drain
// (more than one pod, not pinned, two nodes that can hold them), and deletes one it no longer
// needs.
func (r *Reconciler) reconcileRouterBudget(ctx context.Context, s *scope) error {
	p := s.pipeline
	budget := resources.RouterWantsDisruptionBudget(p)
	if budget {
		var err error
		if budget, err = r.twoNodesCanHold(ctx, nil, nil); err != nil {
			return err
		}
	}
	pdb := &policyv1.PodDisruptionBudget{}
	if budget {
		_, err := r.applyChild(ctx, s, pdb, resources.RouterPDB(p))
		return err
	}
	owned, err := r.applier().Child(ctx, p, client.ObjectKey{Namespace: p.Namespace, Name: resources.RouterObjectName(p)}, pdb)
	if owned && resources.IsRouterObject(pdb) {
		err = r.applier().Delete(ctx, p, pdb, "PodDisruptionBudget")
	}
	return err
}

// observeRouter reads the router's Deployment and Service, as they are, into the pass's
// observations.
func (r *Reconciler) observeRouter(ctx context.Context, s *scope) error {
	key := client.ObjectKey{Namespace: s.pipeline.Namespace, Name: resources.RouterObjectName(s.pipeline)}
	d, svc := &appsv1.Deployment{}, &corev1.Service{}
	if owned, err := r.applier().Child(ctx, s.pipeline, key, d); err != nil {
		return fmt.Errorf("get router deployment: %w", err)
	} else if owned {
		s.obs.RouterDeployment = d
		r.observeRouterPods(ctx, s, d)
	}
	if owned, err := r.applier().Child(ctx, s.pipeline, key, svc); err != nil {
		return fmt.Errorf("get router service: %w", err)
	} else if owned {
		s.obs.RouterService = svc
	}
	return nil
}

// deleteDisabledRouter deletes the router's objects of a Pipeline whose router is disabled. The
// stale pass finds them too, but only when the status says the spec changed since the last
// successful pass; a router created by a pass whose successor listed a cache that did not hold
// it yet would otherwise keep running a configuration nobody follows. Cached reads by name cost
// no request; objects of a step named router are left alone.
func (r *Reconciler) deleteDisabledRouter(ctx context.Context, s *scope) error {
	p := s.pipeline
	key := client.ObjectKey{Namespace: p.Namespace, Name: resources.RouterObjectName(p)}
	// A step named router takes the Deployment and Service of that name over in this pass.
	stepWantsName := false
	for i := range p.Spec.Steps {
		stepWantsName = stepWantsName || resources.StepObjectName(p, i) == key.Name
	}
	var errs []error
	for _, c := range []struct {
		obj      client.Object
		kind     string
		stepKind bool
	}{{&corev1.ConfigMap{}, "ConfigMap", false}, {&appsv1.Deployment{}, "Deployment", true}, {&corev1.Service{}, "Service", true},
		{&policyv1.PodDisruptionBudget{}, "PodDisruptionBudget", true}} {
		if c.stepKind && stepWantsName {
			continue
		}
		owned, err := r.applier().Child(ctx, p, key, c.obj)
		if owned && resources.IsRouterObject(c.obj) {
			// Only the version read: one changed since is looked at again (a conflict).
			uid, rv := c.obj.GetUID(), c.obj.GetResourceVersion()
			err = r.applier().Delete(ctx, p, c.obj, c.kind, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
