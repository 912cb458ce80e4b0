package faults

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// labelManagedBy is the label the operator puts on everything it creates.
const labelManagedBy = "app.kubernetes.io/managed-by"

// worldUser is the user the simulated controllers write as.
const worldUser = "simulated-controllers"

// simulatedControllers play the controllers that envtest does not run, until the case ends:
// the deployment controller makes every Deployment of the operator available for its current
// generation, and the volume binder binds its claims and volumes. They read through a cache of
// their own and write through the apiserver, ignoring refusals: the next round tries again.
type simulatedControllers struct {
	cfg  *rest.Config
	stop func()
}

// startWorld starts the simulated controllers of a case.
func startWorld(r *run, cp *controlPlane) *simulatedControllers {
	r.Helper()
	w := &simulatedControllers{cfg: cp.config(r, worldUser)}
	w.start(r)
	r.Cleanup(func() { w.stop() })
	return w
}

// restart starts the simulated controllers afresh, with a new cache: after an outage the
// informers of the old one would first wait out their own backoff, which is not the operator's
// time to measure.
func (w *simulatedControllers) restart(r *run) {
	r.Helper()
	w.stop()
	w.start(r)
}

func (w *simulatedControllers) start(r *run) {
	r.Helper()
	w.ensureNodes(r)
	managed := labels.SelectorFromSet(labels.Set{labelManagedBy: resources.ManagedBy})
	c, err := cache.New(w.cfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:            {Label: managed},
		&corev1.PersistentVolumeClaim{}: {Label: managed},
		&corev1.PersistentVolume{}:      {Label: managed},
	}})
	if err != nil {
		r.Fatalf("create the simulated controllers' cache: %v", err)
	}
	writer, err := client.New(w.cfg, client.Options{Scheme: scheme})
	if err != nil {
		r.Fatalf("create the simulated controllers' client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		_ = c.Start(ctx)
	}()
	// Informers start on the first read; the loop reads from the first round.
	go func() {
		defer func() { done <- struct{}{} }()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				worldRound(ctx, c, writer)
			}
		}
	}()
	w.stop = func() { cancel(); <-done; <-done }
}

// worldRound brings every cached Deployment, claim and volume of the operator to where the
// built-in controllers would.
func worldRound(ctx context.Context, c cache.Cache, w client.Client) {
	deployments := &appsv1.DeploymentList{}
	if c.List(ctx, deployments) == nil {
		for i := range deployments.Items {
			d := &deployments.Items[i]
			replicas := ptr.Deref(d.Spec.Replicas, 1)
			if !d.DeletionTimestamp.IsZero() || (d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == replicas) {
				continue
			}
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas,
				ReadyReplicas: replicas, AvailableReplicas: replicas}
			_ = w.Status().Update(ctx, d)
		}
	}
	// As kube-controller-manager's volume binder: a volume first, then the claim bound to it
	// (a claim that names a volume is Bound only once that volume is).
	bound := map[string]bool{}
	volumes := &corev1.PersistentVolumeList{}
	if c.List(ctx, volumes) == nil {
		for i := range volumes.Items {
			pv := &volumes.Items[i]
			if !pv.DeletionTimestamp.IsZero() {
				continue
			}
			if pv.Status.Phase != corev1.VolumeBound {
				pv.Status.Phase = corev1.VolumeBound
				if w.Status().Update(ctx, pv) != nil {
					continue
				}
			}
			bound[pv.Name] = true
		}
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if c.List(ctx, claims) == nil {
		for i := range claims.Items {
			pvc := &claims.Items[i]
			if pvc.DeletionTimestamp.IsZero() && pvc.Status.Phase != corev1.ClaimBound &&
				(pvc.Spec.VolumeName == "" || bound[pvc.Spec.VolumeName]) {
				pvc.Status.Phase = corev1.ClaimBound
				_ = w.Status().Update(ctx, pvc)
			}
		}
	}
}

// ensureNodes makes the suite's nodes exist and report Ready, as their kubelets would; nothing
// here takes them down.
func (w *simulatedControllers) ensureNodes(r *run) {
	r.Helper()
	c, err := client.New(w.cfg, client.Options{Scheme: scheme})
	if err != nil {
		r.Fatalf("create the simulated kubelets' client: %v", err)
	}
	ctx := r.Context()
	for _, name := range faultNodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
		if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			r.Fatalf("create node %s: %v", name, err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			r.Fatalf("get node %s: %v", name, err)
		}
		if c := nodes.ReadyCondition(node); c != nil && c.Status == corev1.ConditionTrue {
			continue
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if err := c.Status().Update(ctx, node); err != nil {
			r.Fatalf("make node %s ready: %v", name, err)
		}
	}
}
