package controller

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
)

// reconcileRouter makes the router's ConfigMap, Deployment and Service exist as the spec says
// when spec.router is enabled, and deletes them once it is not. Without a router image, or with
// a configuration the router would refuse and no router running yet, the pass sees the router
// disabled (see planRouter).
func (r *PipelineReconciler) reconcileRouter(ctx context.Context, s *scope) error {
	p := s.pipeline
	if !routerEnabled(p) {
		return r.deleteDisabledRouter(ctx, s)
	}
	if location := p.Spec.Router.Location; location != "" {
		exists, err := nodes.WithHostname(ctx, r.Client, location)
		if err != nil {
			return err
		}
		if !exists {
			s.addProblem(pipelinev1beta1.ReasonNodeNotFound, "router: node %s does not exist (no node has %s=%s)",
				location, corev1.LabelHostname, location)
		}
	}
	if s.routerConfigErr != nil {
		// Admission refuses what the router would (the webhook compiles stopWhen); a Pipeline
		// stored without the webhook may still carry it. A router started with it would only
		// crash: the router that runs is left as it is.
		s.addProblem(pipelinev1beta1.ReasonRouterConfigInvalid, "router: its configuration is refused: %v", s.routerConfigErr)
		return r.observeRouter(ctx, s)
	}
	config, err := routerConfigJSON(p)
	if err != nil {
		return err
	}
	// The configuration goes first: a router pod that starts before it exists would fail.
	cm := &corev1.ConfigMap{}
	ok, err := r.applyChild(ctx, s, cm, desiredRouterConfigMap(p, config))
	if err != nil || !ok {
		return err
	}
	d := &appsv1.Deployment{}
	if ok, err = r.applyChild(ctx, s, d, desiredRouterDeployment(p, r.RouterImage, config)); err != nil {
		return err
	}
	if ok {
		s.obs.routerDeployment = d
	}
	svc := &corev1.Service{}
	if ok, err = r.applyChild(ctx, s, svc, desiredRouterService(p)); err != nil {
		return err
	}
	if ok {
		s.obs.routerService = svc
	}
	return nil
}

// observeRouter reads the router's Deployment and Service, as they are, into the pass's
// observations.
func (r *PipelineReconciler) observeRouter(ctx context.Context, s *scope) error {
	key := client.ObjectKey{Namespace: s.pipeline.Namespace, Name: routerObjectName(s.pipeline)}
	d, svc := &appsv1.Deployment{}, &corev1.Service{}
	if owned, err := r.cachedChild(ctx, s.pipeline, key, d); err != nil {
		return fmt.Errorf("get router deployment: %w", err)
	} else if owned {
		s.obs.routerDeployment = d
	}
	if owned, err := r.cachedChild(ctx, s.pipeline, key, svc); err != nil {
		return fmt.Errorf("get router service: %w", err)
	} else if owned {
		s.obs.routerService = svc
	}
	return nil
}

// deleteDisabledRouter deletes the router's objects of a Pipeline whose router is disabled. The
// stale pass finds them too, but only when the status says the spec changed since the last
// successful pass; a router created by a pass whose successor listed a cache that did not hold
// it yet would otherwise keep running a configuration nobody follows. Cached reads by name cost
// no request; objects of a step named router are left alone.
func (r *PipelineReconciler) deleteDisabledRouter(ctx context.Context, s *scope) error {
	p := s.pipeline
	key := client.ObjectKey{Namespace: p.Namespace, Name: routerObjectName(p)}
	// A step named router takes the Deployment and Service of that name over in this pass.
	stepWantsName := false
	for i := range p.Spec.Steps {
		stepWantsName = stepWantsName || stepObjectName(p, i) == key.Name
	}
	var errs []error
	for _, c := range []struct {
		obj      client.Object
		kind     string
		stepKind bool
	}{{&corev1.ConfigMap{}, "ConfigMap", false}, {&appsv1.Deployment{}, "Deployment", true}, {&corev1.Service{}, "Service", true}} {
		if c.stepKind && stepWantsName {
			continue
		}
		owned, err := r.cachedChild(ctx, p, key, c.obj)
		if owned && isRouterObject(c.obj) {
			// Only the version read: one changed since is looked at again (a conflict).
			uid, rv := c.obj.GetUID(), c.obj.GetResourceVersion()
			err = r.deleteChild(ctx, p, c.obj, c.kind, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
