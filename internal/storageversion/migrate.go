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
package storageversion

import (
	"context"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
}

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
// when the CRD recorded no version but its storage version already, and nothing was patched.
func (m *Migration) Run(ctx context.Context) (int, bool, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := m.Client.Get(ctx, client.ObjectKey{Name: CRD}, crd); err != nil {
		return 0, false, fmt.Errorf("read CRD %s: %w", CRD, err)
	}
	storage := storageVersion(crd)
	if storage == "" {
		return 0, false, fmt.Errorf("CRD %s has no storage version", CRD)
	}
	if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		return 0, false, nil
	}
	n, err := m.rewrite(ctx)
	if err != nil {
		return n, false, err
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"storedVersions":[%q]}}`, storage))
	if err := m.Client.Status().Patch(ctx, crd, patch); err != nil {
		return n, false, fmt.Errorf("set the stored versions of CRD %s to %s: %w", CRD, storage, err)
	}
	return n, true, nil
}

// rewrite patches every Pipeline with an empty patch, a page at a time. The patch passes the
// admission webhooks like any update: the defaulting webhook may add a default a Pipeline
// admitted without the webhooks lacked, and a Pipeline the validating webhook refuses now
// stops the migration (retried, and named in the log) until it is fixed.
func (m *Migration) rewrite(ctx context.Context) (int, error) {
	n := 0
	opts := []client.ListOption{client.Limit(100)}
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(pipelinev1.GroupVersion.WithKind("PipelineList"))
		if err := m.Client.List(ctx, list, opts...); err != nil {
			return n, fmt.Errorf("list Pipelines: %w", err)
		}
		for i := range list.Items {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(pipelinev1.GroupVersion.WithKind("Pipeline"))
			u.SetNamespace(list.Items[i].Namespace)
			u.SetName(list.Items[i].Name)
			err := m.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte("{}")))
			if apierrors.IsNotFound(err) {
				continue // deleted meanwhile: nothing stored
			}
			if err != nil {
				return n, fmt.Errorf("rewrite Pipeline %s/%s: %w", u.GetNamespace(), u.GetName(), err)
			}
			n++
		}
		if list.Continue == "" {
			return n, nil
		}
		opts = []client.ListOption{client.Limit(100), client.Continue(list.Continue)}
	}
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
