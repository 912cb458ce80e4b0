package apply

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// handOverCreatedFields moves the fields owned by the operator's create of current into its
// apply. Entries read from the apiserver carry their field sets; a cached child carries only
// createdMarker, which has none, and its managedFields are read first.
func (a *Applier) handOverCreatedFields(ctx context.Context, current client.Object, u *unstructured.Unstructured) error {
	obj := current
	if current.GetManagedFields()[0].FieldsV1 == nil {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(u.GroupVersionKind())
		if err := a.APIReader.Get(ctx, client.ObjectKeyFromObject(u), m); err != nil {
			return err
		}
		obj = m
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(obj, sets.New(FieldManager), FieldManager)
	if err != nil || patch == nil {
		return err
	}
	return a.Client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch))
}

// createdMarker stands, in a cached child, for the managedFields entry of the create that made
// it: the cache keeps no managedFields, but must tell update which children still need the
// hand-over. All cached children share this one slice (reads from the cache get deep copies).
var createdMarker = []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate}}

// hasCreatedFields reports whether obj has fields owned by the operator's create.
func hasCreatedFields(obj metav1.Object) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == "" {
			return true
		}
	}
	return false
}

// ReplicasHandOverManager is the field manager that holds the replicas of a step's Deployment
// between the moment the step becomes autoscaled and the first scale of its
// HorizontalPodAutoscaler. The operator's own apply stops setting replicas then; were nobody
// left owning the field, the apiserver would remove it and the Deployment would drop to one
// pod. This manager keeps the count the step had; it writes nothing else, and only once per
// hand-over.
const ReplicasHandOverManager = FieldManager + "-replicas-handover"

// handOverReplicas keeps the replicas (other than zero) of an existing Deployment whose step
// became autoscaled: u, the operator's configuration, no longer sets them. When the operator's apply still owns
// the field, ReplicasHandOverManager applies the live count first, so that the field keeps an
// owner and its value when the operator's apply lets it go. The autoscaler's first scale (an
// update of the scale subresource) then takes the field over. The Deployment is read from the
// apiserver: the cache holds no managedFields.
func (a *Applier) handOverReplicas(ctx context.Context, u *unstructured.Unstructured) error {
	if u.GetKind() != "Deployment" {
		return nil
	}
	if _, set, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); set {
		return nil
	}
	live := &appsv1.Deployment{}
	if err := a.APIReader.Get(ctx, client.ObjectKeyFromObject(u), live); err != nil {
		return fmt.Errorf("get deployment: %w", err)
	}
	// A Deployment at zero (a step whose model storage was withdrawn) is not kept there: an
	// autoscaler does not scale a target up from zero. The field goes, and the apiserver's
	// default of one pod hands it to the autoscaler.
	if !ownsReplicas(live.ManagedFields, FieldManager) || live.Spec.Replicas == nil || *live.Spec.Replicas == 0 {
		return nil
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata": map[string]any{"name": u.GetName(), "namespace": u.GetNamespace()},
		"spec":     map[string]any{"replicas": int64(*live.Spec.Replicas)},
	}}
	return a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(ReplicasHandOverManager))
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
