package resources

import (
	"cmp"
	"maps"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// PV is the model PersistentVolume of p (nfs and csi storage), named name, pre-bound to the
// claim of PVC so that no other claim can take it. name is PVName(p) (empty is that too), or the
// name of the volume an earlier version made for the claim, which keeps it.
func PV(p *pipelinev1beta1.Pipeline, name string) *corev1ac.PersistentVolumeApplyConfiguration {
	s := p.Spec.ModelStorage
	name = cmp.Or(name, PVName(p))
	spec := corev1ac.PersistentVolumeSpec().
		WithCapacity(corev1.ResourceList{corev1.ResourceStorage: capacity(p)}).
		WithAccessModes(accessModes(p)...).
		WithPersistentVolumeReclaimPolicy(corev1.PersistentVolumeReclaimRetain).
		WithStorageClassName("").
		WithClaimRef(corev1ac.ObjectReference().
			WithKind("PersistentVolumeClaim").
			WithAPIVersion("v1").
			WithNamespace(p.Namespace).
			WithName(ClaimName(p)))

	switch StorageType(p) {
	case pipelinev1beta1.StorageTypeCSI:
		driver := s.CSIParameter[pipelinev1beta1.CSIDriverParameter]
		if driver == "" {
			driver = pipelinev1beta1.DefaultCSIDriver
		}
		attrs := maps.Clone(s.CSIParameter)
		delete(attrs, pipelinev1beta1.CSIDriverParameter)
		spec.WithCSI(corev1ac.CSIPersistentVolumeSource().
			WithDriver(driver).
			WithVolumeHandle(name).
			WithReadOnly(true).
			WithVolumeAttributes(attrs))
	default:
		spec.WithNFS(corev1ac.NFSVolumeSource().
			WithServer(s.CSIParameter["server"]).
			WithPath(s.CSIParameter["share"]).
			WithReadOnly(true))
	}

	return corev1ac.PersistentVolume(name).
		WithLabels(storageLabels(p)).
		WithSpec(spec)
}

// VolumeMadeFor reports whether pv is a volume the operator made for p and its claim pvc: it
// carries the labels of p's storage (managed by the operator, p's name and namespace) and is
// reserved (claimRef) for pvc by namespace and name.
func VolumeMadeFor(p *pipelinev1beta1.Pipeline, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) bool {
	l := pv.Labels
	ref := pv.Spec.ClaimRef
	return l[LabelManagedBy] == ManagedBy && l[LabelPipeline] == p.Name && l[LabelPipelineNamespace] == p.Namespace &&
		ref != nil && ref.Namespace == pvc.Namespace && ref.Name == pvc.Name && pvc.Namespace == p.Namespace
}

// PVC is the claim every step of p mounts: bound to the volume named volume (as PV; empty is
// PVName(p)) for nfs and csi storage, provisioned by storageClassName for storageClass storage.
func PVC(p *pipelinev1beta1.Pipeline, volume string) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(accessModes(p)...).
		WithResources(corev1ac.VolumeResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceStorage: capacity(p)}))
	if StorageType(p) == pipelinev1beta1.StorageTypeStorageClass {
		spec.WithStorageClassName(p.Spec.ModelStorage.StorageClassName)
	} else {
		spec.WithStorageClassName("").WithVolumeName(cmp.Or(volume, PVName(p)))
	}
	return corev1ac.PersistentVolumeClaim(ClaimName(p), p.Namespace).
		WithLabels(storageLabels(p)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(spec)
}
