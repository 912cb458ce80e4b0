package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// reconcileError is an error of a pass with the Reconciled reason it reports.
type reconcileError struct {
	reason string
	err    error
}

func (e *reconcileError) Error() string { return e.err.Error() }
func (e *reconcileError) Unwrap() error { return e.err }

func applyFailed(err error) error {
	return &reconcileError{reason: pipelinev1beta1.ReasonApplyFailed, err: err}
}
func deleteFailed(err error) error {
	return &reconcileError{reason: pipelinev1beta1.ReasonDeleteFailed, err: err}
}

// reconcileErrorReason is the Reconciled reason of an error returned by a pass.
func reconcileErrorReason(err error) string {
	var re *reconcileError
	if errors.As(err, &re) {
		return re.reason
	}
	return pipelinev1beta1.ReasonReconcileFailed
}

// ownedBy reports whether obj is a child of p: controlled by it, or for the cluster-scoped PV,
// labelled with its namespace and name.
func ownedBy(p *pipelinev1beta1.Pipeline, obj client.Object) bool {
	if obj.GetNamespace() == "" {
		l := obj.GetLabels()
		return l[LabelPipeline] == p.Name && l[LabelPipelineNamespace] == p.Namespace
	}
	return metav1.IsControlledBy(obj, p)
}

// applyChild makes the child described by desired exist as described and fills current with
// it. It writes nothing when current already matches, and leaves alone an object of the same
// name that is not p's child (reporting a NameConflict problem). It returns whether current
// holds p's child.
func (r *PipelineReconciler) applyChild(ctx context.Context, s *scope, current client.Object, desired runtime.ApplyConfiguration) (bool, error) {
	ok, _, err := r.applyExistingChild(ctx, s, current, desired)
	return ok, err
}

// applyExistingChild is applyChild that also reports whether it changed a child that existed
// before: an update was written (not a create, not a child already up to date).
func (r *PipelineReconciler) applyExistingChild(ctx context.Context, s *scope, current client.Object, desired runtime.ApplyConfiguration) (ok, updated bool, err error) {
	a, err := newAppliedObject(desired)
	if err != nil {
		return false, false, err
	}
	u := a.unstructured()
	key := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
	kind := u.GetKind()

	err = r.Client.Get(ctx, key, current)
	if apierrors.IsNotFound(err) {
		// The cache holds only the operator's objects. A plain create fails on an object of the
		// same name, so the operator never takes over someone else's object, at no extra request.
		created, cerr := r.createChild(ctx, s, current, u)
		if cerr != nil {
			return false, false, r.recordApplyFailed(s, u, "Create", cerr)
		}
		if created {
			return true, false, nil
		}
		// An object of that name exists that the cache has not shown yet: the operator's own
		// from an earlier pass, or someone else's. It is read into an empty object: decoding
		// into current, which holds the desired content, would keep the fields the server's
		// copy lacks, and the comparison would see fields that are not there.
		zero(current)
		err = r.APIReader.Get(ctx, key, current)
	}
	if err != nil {
		return false, false, fmt.Errorf("get %s %s: %w", kind, key.Name, err)
	}
	if !ownedBy(s.pipeline, current) {
		s.conflict(kind, key.Name)
		return false, false, nil
	}
	if selectorChanged(current, u) {
		// A Deployment's selector cannot change: the name passed from a step to the router, or
		// back, within one spec change. The old child goes, its deletion starts the pass that
		// creates the new one.
		if !current.GetDeletionTimestamp().IsZero() {
			s.requeueWithin(conflictRetryInterval)
			return false, false, nil
		}
		uid := current.GetUID()
		s.requeueWithin(conflictRetryInterval)
		return false, false, r.deleteChild(ctx, s.pipeline, current, kind, client.Preconditions{UID: &uid})
	}
	if ok, err := a.upToDate(current); err != nil || ok {
		return err == nil, false, err
	}
	if err := r.updateChild(ctx, current, u); err != nil {
		return false, false, r.recordApplyFailed(s, u, "Update", err)
	}
	// The child is the event's related object: events about different children stay apart.
	r.Recorder.Eventf(s.pipeline, u, corev1.EventTypeNormal, "Updated", "Update", "Updated %s %s", kind, key.Name)
	return true, true, nil
}

// selectorChanged reports whether current is a Deployment whose pod selector differs from the
// one u describes: the apiserver refuses to change it, so the Deployment must be replaced.
func selectorChanged(current client.Object, u *unstructured.Unstructured) bool {
	d, ok := current.(*appsv1.Deployment)
	if !ok || d.Spec.Selector == nil {
		return false
	}
	want, _, err := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
	if err != nil {
		return false
	}
	return len(d.Spec.Selector.MatchExpressions) > 0 || !maps.Equal(d.Spec.Selector.MatchLabels, want)
}

// cachedChild reads the object key names into obj from the cache and reports whether it is a
// child of p; a missing object is not an error.
func (r *PipelineReconciler) cachedChild(ctx context.Context, p *pipelinev1beta1.Pipeline, key client.ObjectKey, obj client.Object) (bool, error) {
	if err := r.Client.Get(ctx, key, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return ownedBy(p, obj), nil
}

// zero sets the object obj points to to its zero value.
func zero(obj client.Object) {
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
}

// recordApplyFailed records a warning event for a child the apiserver refused and returns the error
// of the pass.
func (r *PipelineReconciler) recordApplyFailed(s *scope, u *unstructured.Unstructured, action string, err error) error {
	r.Recorder.Eventf(s.pipeline, u, corev1.EventTypeWarning, pipelinev1beta1.ReasonApplyFailed, action,
		"Failed to apply %s %s: %v", u.GetKind(), u.GetName(), err)
	return applyFailed(fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err))
}

// createChild creates the child u describes and fills current with it. It returns false, and
// no error, when an object of that name already exists.
func (r *PipelineReconciler) createChild(ctx context.Context, s *scope, current client.Object, u *unstructured.Unstructured) (bool, error) {
	// The typed object is sent and read back: decoding the answer into it costs far less than
	// into unstructured content.
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, current); err != nil {
		return false, fmt.Errorf("convert: %w", err)
	}
	err := r.Client.Create(ctx, current, client.FieldOwner(FieldManager))
	switch {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, err
	}
	s.recordCreated(u.GetKind(), u.GetName(), u)
	return true, nil
}

// updateChild applies u, server-side, to current, the existing child, and fills current with
// the result.
//
// A child made by createChild starts with its fields owned by the create (an Update operation
// of the operator's field manager), and an apply never removes a field that another operation
// still owns. Before its first update such a child therefore has the create's fields handed
// over to the operator's apply, the way kubectl moves objects from client-side to server-side
// apply: from then on fields the spec drops are removed.
func (r *PipelineReconciler) updateChild(ctx context.Context, current client.Object, u *unstructured.Unstructured) error {
	if hasCreatedFields(current) {
		if err := r.handOverCreatedFields(ctx, current, u); err != nil {
			return fmt.Errorf("hand the fields of the create over to the apply: %w", err)
		}
	}
	if err := r.handOverReplicas(ctx, u); err != nil {
		return fmt.Errorf("hand the replicas over to the autoscaler: %w", err)
	}
	obj := u.DeepCopy()
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, current); err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	return nil
}

// handOverCreatedFields moves the fields owned by the operator's create of current into its
// apply. Entries read from the apiserver carry their field sets; a cached child carries only
// createdMarker, which has none, and its managedFields are read first.
func (r *PipelineReconciler) handOverCreatedFields(ctx context.Context, current client.Object, u *unstructured.Unstructured) error {
	obj := current
	if current.GetManagedFields()[0].FieldsV1 == nil {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(u.GroupVersionKind())
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(u), m); err != nil {
			return err
		}
		obj = m
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(obj, sets.New(FieldManager), FieldManager)
	if err != nil || patch == nil {
		return err
	}
	return r.Client.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch))
}

// createdMarker stands, in a cached child, for the managedFields entry of the create that made
// it: the cache keeps no managedFields, but must tell updateChild which children still need the
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

// keepCreatedMarker is the cache transform of children: it drops their managedFields, keeping
// only createdMarker on a child whose create still owns fields.
func keepCreatedMarker(obj any) (any, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return obj, nil
	}
	if hasCreatedFields(m) {
		m.SetManagedFields(createdMarker)
	} else {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// deleteChild deletes a child that the spec no longer describes. p receives the events; when p
// is nil (the Pipeline is gone) the deletion is logged instead.
func (r *PipelineReconciler) deleteChild(ctx context.Context, p *pipelinev1beta1.Pipeline, obj client.Object, kind string, opts ...client.DeleteOption) error {
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	err := r.Client.Delete(ctx, obj, append([]client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)}, opts...)...)
	if client.IgnoreNotFound(err) != nil {
		if p != nil {
			r.Recorder.Eventf(p, obj, corev1.EventTypeWarning, pipelinev1beta1.ReasonDeleteFailed, "Delete",
				"Failed to delete %s %s: %v", kind, obj.GetName(), err)
		}
		return deleteFailed(fmt.Errorf("delete %s %s: %w", kind, obj.GetName(), err))
	}
	if err != nil { // not found: already gone
		return nil
	}
	if p != nil {
		r.Recorder.Eventf(p, obj, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted %s %s", kind, obj.GetName())
	} else {
		log.FromContext(ctx).Info("Deleted the child of a Pipeline that is gone", "kind", kind, "name", obj.GetName())
	}
	return nil
}
