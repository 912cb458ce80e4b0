package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
)

// reconcileRouter makes the router's ConfigMap, Deployment and Service exist as the spec says
// when spec.router is enabled; the stale pass deletes them once it is not. Without a router
// image none of them is made: a router without its configuration, or a configuration without
// its router, would only mislead.
func (r *PipelineReconciler) reconcileRouter(ctx context.Context, s *scope) error {
	p := s.pipeline
	if !routerEnabled(p) {
		return nil
	}
	if r.RouterImage == "" {
		s.addProblem(pipelinev1beta1.ReasonRouterImageUnknown,
			"router: the operator knows no router image (its %s environment variable is empty): the router is not deployed",
			EnvRouterImage)
		return nil
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
