package admission

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// storageAccess refuses an inline NFS or CSI storage source to a requester who may not create
// PersistentVolumes: for such a source the operator creates a cluster-scoped PersistentVolume
// (an NFS export or CSI volume of the author's choosing) with its own rights, which would give
// a namespace editor a power that is the cluster administrator's. It asks the apiserver with a
// SubjectAccessReview of the admission request's user, or reuses an allowing answer that
// v.Access keeps. validate calls it on create and whenever the storage changes: a tenant may
// still edit the rest of a Pipeline an administrator made. Its message spells the storage types
// as n says.
func (v *Validator) storageAccess(ctx context.Context, p *pipelinev1.Pipeline, n fieldNames) error {
	m := &p.Spec.ModelStorage
	if v.Reviews == nil || (m.Type != pipelinev1.ModelStorageTypeNFS && m.Type != pipelinev1.ModelStorageTypeCSI) {
		return nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("check who may create the storage: %w", err))
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, vs := range req.UserInfo.Extra {
		extra[k] = authorizationv1.ExtraValue(vs)
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Resource: "persistentvolumes", Version: "v1"},
	}}
	t := n.storageType(m.Type)
	if v.Access.allows(&review.Spec) {
		return nil
	}
	// The answer is valid from before it was asked.
	asked := v.Access.now()
	if err := v.Reviews.Create(ctx, review); err != nil {
		// Closed, not open: without an answer the operator would make the volume for anyone.
		return apierrors.NewServiceUnavailable(fmt.Sprintf(
			"cannot check whether %s may create PersistentVolumes, which %s storage needs: %v; try again", req.UserInfo.Username, t, err))
	}
	if review.Status.Allowed {
		v.Access.allow(&review.Spec, asked)
		return nil
	}
	return apierrors.NewForbidden(pipelinev1.Resource("pipelines"), p.Name,
		field.Forbidden(field.NewPath("spec", "modelStorage", "type"), fmt.Sprintf(
			"%s storage (%s) makes the operator create a PersistentVolume for it, and %s may not create PersistentVolumes "+
				"(verb create on persistentvolumes, cluster-wide): use modelStorage.type %s (a claim that a "+
				"StorageClass provisions) or %s (a claim in namespace %s), or ask a cluster administrator "+
				"to create this storage", t, source(m), req.UserInfo.Username,
			n.storageType(pipelinev1.ModelStorageTypeStorageClass), n.storageType(pipelinev1.ModelStorageTypeExistingClaim), p.Namespace)))
}

// source describes an inline storage source for messages.
func source(m *pipelinev1.ModelStorage) string {
	switch {
	case m.NFS != nil:
		return fmt.Sprintf("NFS server %s, share %s", m.NFS.Server, m.NFS.Path)
	case m.CSI != nil:
		return "CSI driver " + m.CSI.Driver
	}
	return "no source"
}
