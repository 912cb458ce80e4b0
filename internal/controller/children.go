package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	a, err := newAppliedObject(desired)
	if err != nil {
		return false, err
	}
	u := a.unstructured()
	key := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
	kind := u.GetKind()

	err = r.Client.Get(ctx, key, current)
	switch {
	case err == nil:
		if !ownedBy(s.pipeline, current) {
			s.conflict(kind, key.Name)
			return false, nil
		}
		ok, err := a.upToDate(current)
		if err != nil || ok {
			return err == nil, err
		}
	case apierrors.IsNotFound(err):
		// The cache holds only the operator's objects: make sure no one else's has this name.
		// The apiserver's watch cache answers (resourceVersion 0), sparing etcd a read per child.
		foreign := &metav1.PartialObjectMetadata{}
		foreign.SetGroupVersionKind(u.GroupVersionKind())
		if err := r.APIReader.Get(ctx, key, foreign, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}}); err == nil {
			if !ownedBy(s.pipeline, foreign) {
				s.conflict(kind, key.Name)
				return false, nil
			}
		} else if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("get %s %s: %w", kind, key.Name, err)
		}
	default:
		return false, fmt.Errorf("get %s %s: %w", kind, key.Name, err)
	}

	verb, action := "Updated", "Update"
	if current.GetUID() == "" {
		verb, action = "Created", "Create"
	}
	applied := u.DeepCopy()
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		r.Recorder.Eventf(s.pipeline, u, corev1.EventTypeWarning, pipelinev1beta1.ReasonApplyFailed, action,
			"Failed to apply %s %s: %v", kind, key.Name, err)
		return false, applyFailed(fmt.Errorf("apply %s %s: %w", kind, key.Name, err))
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(applied.Object, current); err != nil {
		return false, fmt.Errorf("read back %s %s: %w", kind, key.Name, err)
	}
	if verb == "Created" {
		s.recordCreated(kind, key.Name, u)
	} else {
		// The child is the event's related object: events about different children stay apart.
		r.Recorder.Eventf(s.pipeline, u, corev1.EventTypeNormal, verb, action, "%s %s %s", verb, kind, key.Name)
	}
	return true, nil
}

// deleteChild deletes a child that the spec no longer describes.
func (r *PipelineReconciler) deleteChild(ctx context.Context, p *pipelinev1beta1.Pipeline, obj client.Object, kind string) error {
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	err := r.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if client.IgnoreNotFound(err) != nil {
		r.Recorder.Eventf(p, obj, corev1.EventTypeWarning, pipelinev1beta1.ReasonDeleteFailed, "Delete",
			"Failed to delete %s %s: %v", kind, obj.GetName(), err)
		return deleteFailed(fmt.Errorf("delete %s %s: %w", kind, obj.GetName(), err))
	}
	if err == nil {
		r.Recorder.Eventf(p, obj, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted %s %s", kind, obj.GetName())
	}
	return nil
}
