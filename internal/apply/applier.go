package apply

import (
	"context"
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
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// Applier writes the children of Pipelines: it creates them, applies them server-side under
// FieldManager when they differ from what the operator wants, and deletes them. Its reads go
// through Client, the manager's cache, which holds the children stripped by the transforms of
// cache.go; upToDate compares against exactly that, or against the child read from the
// apiserver when the cache holds only its summary (Get).
type Applier struct {
	// Client reads through the manager's cache and writes to the apiserver.
	Client client.Client
	// APIReader reads the apiserver directly, for objects the cache does not hold (yet).
	APIReader client.Reader
	// Recorder records events on Pipelines.
	Recorder events.EventRecorder
}

// Result is what Apply found and did.
type Result struct {
	// Owned is true when current holds the Pipeline's child: as written, or as it is when the
	// apiserver refused the write.
	Owned bool
	// Created and Updated say which write made the child match (neither: it already did).
	Created, Updated bool
	// Conflict is true when an object of the child's name exists that is not the Pipeline's
	// child: it is left alone.
	Conflict bool
	// Replacing is true when the child must be made anew (a Deployment whose immutable
	// selector changed): the old one is being deleted, and its deletion starts the next pass.
	Replacing bool
}

// Apply makes the child of p that desired describes exist as described, and fills current
// with it. It writes nothing when current already matches, and leaves alone an object of the
// same name that is not p's child (Result.Conflict). A write the apiserver refuses (see
// Refused) leaves current holding the child as it is, Result.Owned true.
func (a *Applier) Apply(ctx context.Context, p *pipelinev1.Pipeline, current client.Object, desired runtime.ApplyConfiguration) (Result, error) {
	ao, err := newAppliedObject(desired)
	if err != nil {
		return Result{}, err
	}
	u := ao.unstructured()
	key := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
	kind := u.GetKind()

	err = a.Get(ctx, key, current)
	if apierrors.IsNotFound(err) {
		// The cache holds only the operator's objects. A plain create fails on an object of the
		// same name, so the operator never takes over someone else's object, at no extra request.
		created, cerr := a.create(ctx, current, u)
		if cerr != nil {
			return Result{}, a.writeFailed(p, u, "Create", cerr)
		}
		if created {
			return Result{Owned: true, Created: true}, nil
		}
		// An object of that name exists that the cache has not shown yet: the operator's own
		// from an earlier pass, or someone else's. It is read into an empty object: decoding
		// into current, which holds the desired content, would keep the fields the server's
		// copy lacks, and the comparison would see fields that are not there.
		zero(current)
		err = a.APIReader.Get(ctx, key, current)
	}
	if err != nil {
		return Result{}, fmt.Errorf("get %s %s: %w", kind, key.Name, err)
	}
	if !resources.OwnedBy(p, current) {
		return Result{Conflict: true}, nil
	}
	if selectorChanged(current, u) {
		// A Deployment's selector cannot change: the name passed from a step to the router, or
		// back, within one spec change. The old child goes, its deletion starts the pass that
		// creates the new one.
		if !current.GetDeletionTimestamp().IsZero() {
			return Result{Replacing: true}, nil
		}
		uid := current.GetUID()
		return Result{Replacing: true}, a.Delete(ctx, p, current, kind, client.Preconditions{UID: &uid})
	}
	if ok, err := ao.upToDate(current); err != nil || ok {
		return Result{Owned: err == nil}, err
	}
	if err := a.update(ctx, current, u); err != nil {
		// current still holds the child as it was read: it exists, and the status says so.
		return Result{Owned: true}, a.writeFailed(p, u, "Update", err)
	}
	// The child is the event's related object: events about different children stay apart.
	a.Recorder.Eventf(p, u, corev1.EventTypeNormal, "Updated", "Update", "Updated %s %s", kind, key.Name)
	return Result{Owned: true, Updated: true}, nil
}

// Child reads the object key names into obj (see Get) and reports whether it is a child of p; a
// missing object is not an error.
func (a *Applier) Child(ctx context.Context, p *pipelinev1.Pipeline, key client.ObjectKey, obj client.Object) (bool, error) {
	if err := a.Get(ctx, key, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return resources.OwnedBy(p, obj), nil
}

// Get reads the object key names into obj from the cache, or from the apiserver when the cache
// holds only its summary (IsSummary): a child larger than MaxCachedChildBytes costs a read per
// pass instead of its size in the cache.
func (a *Applier) Get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	if err := a.Client.Get(ctx, key, obj); err != nil || !IsSummary(obj) {
		return err
	}
	zero(obj)
	return a.APIReader.Get(ctx, key, obj)
}

// Delete deletes a child that the spec no longer describes. p receives the events; when p is
// nil (the Pipeline is gone) the deletion is logged instead.
func (a *Applier) Delete(ctx context.Context, p *pipelinev1.Pipeline, obj client.Object, kind string, opts ...client.DeleteOption) error {
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	err := a.Client.Delete(ctx, obj, append([]client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationBackground)}, opts...)...)
	if client.IgnoreNotFound(err) != nil {
		if p != nil {
			a.Recorder.Eventf(p, obj, corev1.EventTypeWarning, pipelinev1.ReasonDeleteFailed, "Delete",
				"Failed to delete %s %s: %v", kind, obj.GetName(), err)
		}
		return problem.WithReason(pipelinev1.ReasonDeleteFailed, fmt.Errorf("delete %s %s: %w", kind, obj.GetName(), err))
	}
	if err != nil { // not found: already gone
		return nil
	}
	if p != nil {
		a.Recorder.Eventf(p, obj, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted %s %s", kind, obj.GetName())
	} else {
		log.FromContext(ctx).Info("Deleted the child of a Pipeline that is gone", "kind", kind, "name", obj.GetName())
	}
	return nil
}

// Refused reports whether the apiserver refused a write for what it says, not for the moment
// it was sent: the object is invalid, or an admission policy, a webhook, a quota or RBAC
// forbids it. Sending it again changes nothing until a person changes the spec or the cluster.
func Refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsRequestEntityTooLargeError(err)
}

// writeFailed returns the error of a write of u the apiserver did not take. A refusal (Refused)
// carries ReasonApplyRefused: it makes the Pipeline Degraded, whose condition records one event
// when it turns True; any other failure records a warning event here and is retried.
func (a *Applier) writeFailed(p *pipelinev1.Pipeline, u *unstructured.Unstructured, action string, err error) error {
	if Refused(err) {
		return problem.WithReason(pipelinev1.ReasonApplyRefused,
			fmt.Errorf("the apiserver refuses the %s of %s %s: %w", actionNoun[action], u.GetKind(), u.GetName(), err))
	}
	a.Recorder.Eventf(p, u, corev1.EventTypeWarning, pipelinev1.ReasonApplyFailed, action,
		"Failed to apply %s %s: %v", u.GetKind(), u.GetName(), err)
	return problem.WithReason(pipelinev1.ReasonApplyFailed, fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err))
}

var actionNoun = map[string]string{"Create": "creation", "Update": "update"}

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

// zero sets the object obj points to to its zero value.
func zero(obj client.Object) {
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
}

// create creates the child u describes and fills current with it. It returns false, and no
// error, when an object of that name already exists.
func (a *Applier) create(ctx context.Context, current client.Object, u *unstructured.Unstructured) (bool, error) {
	// The typed object is sent and read back: decoding the answer into it costs far less than
	// into unstructured content.
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, current); err != nil {
		return false, fmt.Errorf("convert: %w", err)
	}
	err := a.Client.Create(ctx, current, client.FieldOwner(FieldManager))
	switch {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// update applies u, server-side, to current, the existing child, and fills current with the
// result; current is left as it was when the apply fails.
//
// A child made by create starts with its fields owned by the create (an Update operation of
// the operator's field manager), and an apply never removes a field that another operation
// still owns. Before its first update such a child therefore has the create's fields handed
// over to the operator's apply, the way kubectl moves objects from client-side to server-side
// apply: from then on fields the spec drops are removed.
func (a *Applier) update(ctx context.Context, current client.Object, u *unstructured.Unstructured) error {
	if hasCreatedFields(current) {
		if err := a.handOverCreatedFields(ctx, current, u); err != nil {
			return fmt.Errorf("hand the fields of the create over to the apply: %w", err)
		}
	}
	if err := a.handOverReplicas(ctx, u); err != nil {
		return fmt.Errorf("hand the replicas over to the autoscaler: %w", err)
	}
	obj := u.DeepCopy()
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, current); err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	return nil
}
