package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// ReplicasHandOverManager is the field manager that holds the replicas of a step's Deployment
// between the moment the step becomes autoscaled and the first scale of its
// HorizontalPodAutoscaler. The operator's own apply stops setting replicas then; were nobody
// left owning the field, the apiserver would remove it and the Deployment would drop to one
// pod. This manager keeps the count the step had; it writes nothing else, and only once per
// hand-over.
const ReplicasHandOverManager = FieldManager + "-replicas-handover"

// reconcileScaling makes the HorizontalPodAutoscaler and the PodDisruptionBudget of step i exist
// when the spec asks for them; the stale pass deletes them once it no longer does.
func (r *PipelineReconciler) reconcileScaling(ctx context.Context, s *scope, i int) error {
	p := s.pipeline
	if autoscaling(p, i) != nil {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		ok, err := r.applyChild(ctx, s, hpa, desiredStepHPA(p, i))
		if err != nil {
			return err
		}
		if ok {
			s.obs.autoscalers[i] = hpa
		}
	}
	if needsDisruptionBudget(p, i) {
		if _, err := r.applyChild(ctx, s, &policyv1.PodDisruptionBudget{}, desiredStepPDB(p, i)); err != nil {
			return err
		}
	}
	return r.deleteUnneededScaling(ctx, s, i)
}

// deleteUnneededScaling deletes the autoscaler and the disruption budget of step i when the spec
// no longer asks for them. The stale pass finds them too, but only when the status says the spec
// changed since the last successful pass; one created by a pass whose successor listed a cache
// that did not hold it yet would otherwise stay, and an autoscaler left behind fights the
// operator over the step's replicas. A cached read by name costs no request.
func (r *PipelineReconciler) deleteUnneededScaling(ctx context.Context, s *scope, i int) error {
	p := s.pipeline
	key := client.ObjectKey{Namespace: p.Namespace, Name: stepObjectName(p, i)}
	var errs []error
	for _, c := range []struct {
		obj    client.Object
		kind   string
		needed bool
	}{
		{&autoscalingv2.HorizontalPodAutoscaler{}, "HorizontalPodAutoscaler", autoscaling(p, i) != nil},
		{&policyv1.PodDisruptionBudget{}, "PodDisruptionBudget", needsDisruptionBudget(p, i)},
	} {
		if c.needed {
			continue
		}
		owned, err := r.cachedChild(ctx, p, key, c.obj)
		if owned {
			err = r.deleteChild(ctx, p, c.obj, c.kind)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// wantedScalingChildren are the names of the HorizontalPodAutoscalers and PodDisruptionBudgets
// the steps of p need; the stale pass deletes the others.
func wantedScalingChildren(p *pipelinev1beta1.Pipeline) (autoscalers, budgets map[string]bool) {
	autoscalers, budgets = map[string]bool{}, map[string]bool{}
	for i := range p.Spec.Steps {
		autoscalers[stepObjectName(p, i)] = autoscaling(p, i) != nil
		budgets[stepObjectName(p, i)] = needsDisruptionBudget(p, i)
	}
	return autoscalers, budgets
}

// handOverReplicas keeps the replicas of an existing Deployment whose step became autoscaled:
// u, the operator's configuration, no longer sets them. When the operator's apply still owns
// the field, ReplicasHandOverManager applies the live count first, so that the field keeps an
// owner and its value when the operator's apply lets it go. The autoscaler's first scale (an
// update of the scale subresource) then takes the field over. The Deployment is read from the
// apiserver: the cache holds no managedFields.
func (r *PipelineReconciler) handOverReplicas(ctx context.Context, u *unstructured.Unstructured) error {
	if u.GetKind() != "Deployment" {
		return nil
	}
	if _, set, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); set {
		return nil
	}
	live := &appsv1.Deployment{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
		return fmt.Errorf("get deployment: %w", err)
	}
	if !ownsReplicas(live.ManagedFields, FieldManager) || live.Spec.Replicas == nil {
		return nil
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata": map[string]any{"name": u.GetName(), "namespace": u.GetNamespace()},
		"spec":     map[string]any{"replicas": int64(*live.Spec.Replicas)},
	}}
	return r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(ReplicasHandOverManager))
}

// ownsReplicas reports whether manager owns spec.replicas in entries, through an apply or an
// update of the main resource.
func ownsReplicas(entries []metav1.ManagedFieldsEntry, manager string) bool {
	for _, e := range entries {
		if e.Manager != manager || e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		if _, ok := fields["f:spec"]["f:replicas"]; ok {
			return true
		}
	}
	return false
}

// scalingStatus completes the status of step i with its autoscaler: replicas becomes the count
// the autoscaler asks for (the Deployment's until it has reported), and autoscaling shows the
// autoscaler's bounds and counts. An autoscaler that cannot compute a count (ScalingActive
// False: no metrics API, no resource requests) is reported here only: the step keeps its pods,
// and the Pipeline is not failed for it.
func scalingStatus(p *pipelinev1beta1.Pipeline, i int, st *pipelinev1beta1.StepStatus, d *appsv1.Deployment, hpa *autoscalingv2.HorizontalPodAutoscaler) {
	a := autoscaling(p, i)
	if a == nil {
		return
	}
	as := &pipelinev1beta1.StepAutoscalingStatus{MinReplicas: a.EffectiveMinReplicas(), MaxReplicas: a.MaxReplicas}
	if d != nil && d.Spec.Replicas != nil {
		st.Replicas = *d.Spec.Replicas
	} else {
		st.Replicas = as.MinReplicas
	}
	if hpa != nil {
		as.CurrentReplicas, as.DesiredReplicas = hpa.Status.CurrentReplicas, hpa.Status.DesiredReplicas
		if as.DesiredReplicas > 0 {
			st.Replicas = as.DesiredReplicas
		}
		for _, c := range hpa.Status.Conditions {
			if c.Type != autoscalingv2.ScalingActive {
				continue
			}
			as.ScalingActive = ptr.To(c.Status == corev1.ConditionTrue)
			if c.Status == corev1.ConditionFalse {
				as.Message = truncate(fmt.Sprintf("%s: %s", c.Reason, c.Message), 1024)
			}
		}
	}
	st.Autoscaling = as
}

// stepDeploymentPhase classifies the Deployment of step i. An autoscaled step is available
// once minReplicas of its pods (at least one) run the current template: a scale-up by the autoscaler is not a rollout, and must not turn the Pipeline back
// to creating (nor hold an upgrade of the operator) while the new pods start.
func stepDeploymentPhase(p *pipelinev1beta1.Pipeline, i int, d *appsv1.Deployment) (pipelinev1beta1.DeploymentPhase, string) {
	a := autoscaling(p, i)
	if a == nil || d.Spec.Replicas == nil {
		return deploymentPhase(d)
	}
	// At least one pod: a step scaled to zero by hand (the autoscaler then stands still) serves
	// nothing. A Deployment that has fewer than minReplicas because the autoscaler has not
	// raised it yet (a new step starts at one pod) waits for minReplicas.
	floor := max(1, a.EffectiveMinReplicas())
	scaled := *d
	scaled.Spec.Replicas = &floor
	return deploymentPhase(&scaled)
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
