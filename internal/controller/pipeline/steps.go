package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
)

// reconcileSteps makes the Deployment and Service of every step exist as the spec says.
func (r *Reconciler) reconcileSteps(ctx context.Context, s *scope) error {
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
			err := recoverPanic(ctx, "step "+resources.StepName(s.pipeline, i), func() error { return r.reconcileStep(ctx, s, i) })
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", resources.StepLabel(s.pipeline, i), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// reconcileStep makes the Deployment and Service of step i, and its autoscaler and disruption
// budget when it needs them, exist as the spec says.
func (r *Reconciler) reconcileStep(ctx context.Context, s *scope, i int) error {
	p := s.pipeline
	what := stepPlaced(p, i)
	pl, err := r.place(ctx, s, what)
	if err != nil {
		return err
	}
	d := &appsv1.Deployment{}
	desired := resources.StepDeployment(p, i, s.podSecurity, pl.NodeName, r.ClusterDomain)
	if s.grant.withdrawn() {
		// No pod may keep mounting storage its class no longer grants (see withdrawStorage).
		desired.Spec.WithReplicas(0)
	}
	pl, owned, err := r.applyPlaced(ctx, s, what, pl, d, desired)
	if owned {
		// Also when the update was refused: the Deployment exists, and the status describes it.
		s.obs.Deployments[i] = d
	}
	s.obs.Placements[i] = pl
	if err != nil {
		return err
	}
	if owned {
		r.observePods(ctx, s, i, d)
	}
	svc := &corev1.Service{}
	ok, err := r.applyChild(ctx, s, svc, resources.StepService(p, i))
	if ok {
		s.obs.Services[i] = svc
	}
	if err != nil {
		return err
	}
	return r.reconcileScaling(ctx, s, i)
}

// reconcileIngress makes the Ingress of spec.expose.ingress exist as the spec says; the stale
// pass deletes it once the spec no longer asks for it.
func (r *Reconciler) reconcileIngress(ctx context.Context, s *scope) error {
	if resources.IngressSpec(s.pipeline) == nil {
		return nil
	}
	ing := &networkingv1.Ingress{}
	ok, err := r.applyChild(ctx, s, ing, resources.Ingress(s.pipeline))
	if ok {
		s.obs.Ingress = ing
	}
	return err
}

// podSecurityLevel is the Pod Security level namespace ns enforces.
func (r *Reconciler) podSecurityLevel(ctx context.Context, ns string) (resources.PodSecurityLevel, error) {
	labels, err := r.namespaceLabels(ctx, ns)
	if err != nil {
		return "", err
	}
	return resources.NamespacePodSecurity(labels), nil
}

// namespaceLabels are the labels of namespace ns, read from the cached namespace metadata (the
// apiserver when the cache does not hold the namespace yet).
func (r *Reconciler) namespaceLabels(ctx context.Context, ns string) (map[string]string, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	err := r.Client.Get(ctx, client.ObjectKey{Name: ns}, m)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, client.ObjectKey{Name: ns}, m)
	}
	if err != nil {
		return nil, fmt.Errorf("get namespace %s: %w", ns, err)
	}
	return m.GetLabels(), nil
}

// podRecheckInterval is how often a step whose pods exist but are not all ready is looked at
// again: a container that restarts (a crash loop, a startup probe that gives up) changes no
// object the operator watches.
const podRecheckInterval = 15 * time.Second

// maxObservedPods bounds how many pods of one step a pass reads to tell its state.
const maxObservedPods = 50

// observePods reads the pods of step i, whose Deployment is d, when its state can only be told
// from them (status.NeedsPods): whether they run and load their model, or fail. See listPods.
func (r *Reconciler) observePods(ctx context.Context, s *scope, i int, d *appsv1.Deployment) {
	if pods, ok := r.listPods(ctx, s, d, resources.StepSelector(s.pipeline, i), "step "+resources.StepName(s.pipeline, i)); ok {
		s.obs.Pods[i] = pods
	}
}

// observeRouterPods reads the router's pods, whose Deployment is d, when its state can only be
// told from them: a router that stops at start (a tensor mapping its models refuse) says why in
// its pods' termination message. See listPods.
func (r *Reconciler) observeRouterPods(ctx context.Context, s *scope, d *appsv1.Deployment) {
	if pods, ok := r.listPods(ctx, s, d, resources.RouterSelector(s.pipeline), "router"); ok {
		s.obs.RouterPods = pods
	}
}

// listPods reads the pods selected by selector of the Deployment d, when the state of what runs
// them (what, for the log) can only be told from them (status.NeedsPods). They are read from
// the apiserver, not cached (the operator does not watch pods), and only then, at most
// maxObservedPods; the Pipeline is then looked at again within podRecheckInterval. A failed
// read leaves the state to what the Deployment says.
func (r *Reconciler) listPods(ctx context.Context, s *scope, d *appsv1.Deployment, selector map[string]string, what string) ([]corev1.Pod, bool) {
	if !status.NeedsPods(d) {
		return nil, false
	}
	s.requeueWithin(podRecheckInterval)
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(d.Namespace),
		client.MatchingLabels(selector), client.Limit(maxObservedPods)); err != nil {
		log.FromContext(ctx).Info("Cannot read the pods of the "+what+": its state is told from its Deployment alone",
			"error", err.Error())
		return nil, false
	}
	return pods.Items, true
}
