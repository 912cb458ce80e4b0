// Package storageversion moves the Pipelines an earlier version of the operator stored as
// v1beta1 to v1, the version the apiserver stores now, and then drops v1beta1 from the CRD's
// status.storedVersions, so that a later version of the CRD may stop serving v1beta1.
//
// The apiserver writes an object in the storage version whenever it writes it: an empty patch
// of each Pipeline rewrites one stored in another version (and writes nothing for one stored
// as v1 already), as kube-storage-version-migrator does. Only after every Pipeline has been
// rewritten is status.storedVersions set to [v1]; a Pipeline written meanwhile, in either
// version, is stored as v1. The manager runs the migration once at start, on the leader,
// retrying until it succeeds.
//
// The migration also records the identity of each Pipeline's model storage
// (pipelinev1.StorageIdentityAnnotation) where the conversion data of an earlier API version
// gives it and it is not recorded yet (Migration.RecordStorageIdentity): on every start, also
// once storedVersions is [v1], since a Pipeline stored as v1 before the annotation existed is
// not converted again. Until then the operator leaves the Pipeline's storage alone
// (pipelinev1.Pipeline.StorageIdentityPending).
package storageversion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// CRD is the CustomResourceDefinition of Pipelines.
const CRD = "pipelines.distri-infer.ndsl.cn"

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get,resourceNames=pipelines.distri-infer.ndsl.cn
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=patch,resourceNames=pipelines.distri-infer.ndsl.cn

// Migration rewrites the stored Pipelines in v1 and trims the CRD's storedVersions.
type Migration struct {
	// Client reads and patches Pipelines and the CRD, without a cache: the CRD is read once,
	// and Pipelines are listed in pages.
	Client client.Client
	// Backoff is the wait between failed attempts; zero means a second, doubling up to a minute.
	Backoff wait.Backoff
	// RecordStorageIdentity records on a Pipeline the identity of its model storage that the
	// Pipeline's conversion data gives, when it is not recorded yet, and returns whether it
	// changed the Pipeline (the conversion's, api/v1beta1.RecordStorageIdentity); each Pipeline
	// it changes is patched with the annotation. nil records nothing.
	RecordStorageIdentity func(*pipelinev1.Pipeline) bool
}

// maxConflicts is how many times a Pipeline that changed while its storage identity was being
// recorded is read again before the run gives up (and Start retries it).
const maxConflicts = 5

// Start runs the migration until it succeeds or ctx ends: a manager Runnable.
func (m *Migration) Start(ctx context.Context) error {
	b := m.Backoff
	if b.Duration == 0 {
		b = wait.Backoff{Duration: time.Second, Factor: 2, Steps: 1 << 30, Cap: time.Minute}
	}
	logger := log.FromContext(ctx).WithName("storage-version")
	err := wait.ExponentialBackoffWithContext(ctx, b, func(ctx context.Context) (bool, error) {
		patched, migrated, err := m.Run(ctx)
		if err != nil {
			logger.Info("Migrating the stored Pipelines to v1 failed: retrying", "error", err.Error())
			return false, nil
		}
		if migrated {
			logger.Info("Stored Pipelines migrated to v1: the CRD records v1 alone as stored", "pipelines", patched)
		} else if patched > 0 {
			logger.Info("Storage identities recorded", "pipelines", patched)
		}
		return true, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("migrate the stored Pipelines to v1: %w", err)
	}
	return nil
}

// NeedLeaderElection is true: one replica migrates.
func (m *Migration) NeedLeaderElection() bool { return true }

// Run migrates once. It returns how many Pipelines it patched and whether it migrated: false
// when the CRD recorded no version but its storage version already (then only the storage
// identities are recorded).
func (m *Migration) Run(ctx context.Context) (int, bool, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := m.Client.Get(ctx, client.ObjectKey{Name: CRD}, crd); err != nil {
		return 0, false, fmt.Errorf("read CRD %s: %w", CRD, err)
	}
	storage := storageVersion(crd)
	if storage == "" {
		return 0, false, fmt.Errorf("CRD %s has no storage version", CRD)
	}
	rewrite := !slices.Equal(crd.Status.StoredVersions, []string{storage})
	if !rewrite && m.RecordStorageIdentity == nil {
		return 0, false, nil
	}
	n, err := m.patchAll(ctx, rewrite)
	if err != nil || !rewrite {
		return n, false, err
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"storedVersions":[%q]}}`, storage))
	if err := m.Client.Status().Patch(ctx, crd, patch); err != nil {
		return n, false, fmt.Errorf("set the stored versions of CRD %s to %s: %w", CRD, storage, err)
	}
	return n, true, nil
}

// patchAll patches every Pipeline that needs it (see patch), a page at a time, and returns how
// many it patched. A patch passes the admission webhooks like any update: the defaulting
// webhook may add a default a Pipeline admitted without the webhooks lacked, and a Pipeline the
// validating webhook refuses now fails the run (retried, and named in the log) until it is
// fixed; the other Pipelines are patched all the same.
func (m *Migration) patchAll(ctx context.Context, rewrite bool) (int, error) {
	n := 0
	var errs []error
	opts := []client.ListOption{client.Limit(100)}
	for {
		list := &pipelinev1.PipelineList{}
		if err := m.Client.List(ctx, list, opts...); err != nil {
			return n, errors.Join(append(errs, fmt.Errorf("list Pipelines: %w", err))...)
		}
		for i := range list.Items {
			patched, err := m.patch(ctx, &list.Items[i], rewrite)
			if patched {
				n++
			}
			errs = append(errs, err)
		}
		if list.Continue == "" {
			return n, errors.Join(errs...)
		}
		opts = []client.ListOption{client.Limit(100), client.Continue(list.Continue)}
	}
}

// patch writes p with its storage identity when RecordStorageIdentity records one, else, when
// rewrite, with an empty patch: either rewrites p in the storage version. The identity is
// recorded from the version of p it was read from: the patch carries p's resourceVersion, and a
// Pipeline changed meanwhile is read again. It returns whether it patched p; one deleted
// meanwhile has nothing stored.
func (m *Migration) patch(ctx context.Context, p *pipelinev1.Pipeline, rewrite bool) (bool, error) {
	key := client.ObjectKeyFromObject(p)
	for conflicts := 0; m.RecordStorageIdentity != nil; conflicts++ {
		recorded := p.DeepCopy()
		if !m.RecordStorageIdentity(recorded) {
			break
		}
		err := m.Client.Patch(ctx, recorded, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) && conflicts < maxConflicts {
			err = m.Client.Get(ctx, key, p)
			if err == nil {
				continue
			}
		}
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("record the storage identity of Pipeline %s: %w", key, err)
		}
		return true, nil
	}
	if !rewrite {
		return false, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(pipelinev1.GroupVersion.WithKind("Pipeline"))
	u.SetNamespace(p.Namespace)
	u.SetName(p.Name)
	err := m.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte("{}")))
	switch {
	case apierrors.IsNotFound(err):
		return false, nil // deleted meanwhile: nothing stored
	case err != nil:
		return false, fmt.Errorf("rewrite Pipeline %s: %w", key, err)
	}
	return true, nil
}

// storageVersion is the version crd stores, empty if none.
func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}
