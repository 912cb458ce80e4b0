package resources

import (
	"cmp"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// VolumeSource is where the model PersistentVolume of a Pipeline finds its data, resolved
// either from the spec (NFS and CSI storage: InlineVolumeSource) or from the ModelStorageClass
// the spec names (ClassVolumeSource). Exactly one of NFS and CSI is set.
type VolumeSource struct {
	// NFS is an NFS export.
	NFS *corev1.NFSVolumeSource
	// CSI is a volume a CSI driver mounts; an empty VolumeHandle is the PersistentVolume's name.
	CSI *corev1.CSIPersistentVolumeSource
	// MountOptions are the PersistentVolume's mount options.
	MountOptions []string
}

// InlineVolumeSource is the source that NFS or CSI storage describes, read-only: for CSI,
// modelStorage.csi's driver and volumeAttributes; for NFS, modelStorage.nfs's server and path.
func InlineVolumeSource(p *pipelinev1.Pipeline) VolumeSource {
	m := p.Spec.ModelStorage
	if StorageType(p) == pipelinev1.ModelStorageTypeCSI && m.CSI != nil {
		return VolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: m.CSI.Driver, ReadOnly: true,
			VolumeAttributes: maps.Clone(m.CSI.VolumeAttributes)}}
	}
	var server, path string
	if m.NFS != nil {
		server, path = m.NFS.Server, m.NFS.Path
	}
	return VolumeSource{NFS: &corev1.NFSVolumeSource{Server: server, Path: path, ReadOnly: true}}
}

// ClassVolumeSource is the source a ModelStorageClass publishes: its NFS export or CSI volume,
// read-only as the class says, with its mount options.
func ClassVolumeSource(c *pipelinev1.ModelStorageClass) VolumeSource {
	src := VolumeSource{MountOptions: slices.Clone(c.Spec.MountOptions)}
	readOnly := c.EffectiveReadOnly()
	switch {
	case c.Spec.CSI != nil:
		src.CSI = &corev1.CSIPersistentVolumeSource{Driver: c.Spec.CSI.Driver, VolumeHandle: c.Spec.CSI.VolumeHandle,
			ReadOnly: readOnly, VolumeAttributes: maps.Clone(c.Spec.CSI.VolumeAttributes)}
	case c.Spec.NFS != nil:
		src.NFS = &corev1.NFSVolumeSource{Server: c.Spec.NFS.Server, Path: c.Spec.NFS.Path, ReadOnly: readOnly}
	}
	return src
}

// PV is the model PersistentVolume of p (NFS, CSI and ModelStorageClass storage) with the
// source src, named name, pre-bound to the claim of PVC so that no other claim can take it. name
// is PVName(p) (empty is that too), or the name of the volume an earlier version made for the
// claim, which keeps it.
func PV(p *pipelinev1.Pipeline, name string, src VolumeSource) *corev1ac.PersistentVolumeApplyConfiguration {
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
	if len(src.MountOptions) > 0 {
		spec.WithMountOptions(src.MountOptions...)
	}

	switch {
	case src.CSI != nil:
		csi := corev1ac.CSIPersistentVolumeSource().
			WithDriver(src.CSI.Driver).
			WithVolumeHandle(cmp.Or(src.CSI.VolumeHandle, name)).
			WithReadOnly(src.CSI.ReadOnly)
		if len(src.CSI.VolumeAttributes) > 0 {
			csi.WithVolumeAttributes(src.CSI.VolumeAttributes)
		}
		spec.WithCSI(csi)
	case src.NFS != nil:
		spec.WithNFS(corev1ac.NFSVolumeSource().
			WithServer(src.NFS.Server).
			WithPath(src.NFS.Path).
			WithReadOnly(src.NFS.ReadOnly))
	}

	return corev1ac.PersistentVolume(name).
		WithLabels(storageLabels(p)).
		WithSpec(spec)
}

// VolumeMadeFor reports whether pv is a volume the operator made for p and its claim pvc: it
// carries the labels of p's storage (managed by the operator, p's name and namespace) and is
// reserved (claimRef) for pvc by namespace and name.
func VolumeMadeFor(p *pipelinev1.Pipeline, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) bool {
	l := pv.Labels
	ref := pv.Spec.ClaimRef
	return l[LabelManagedBy] == ManagedBy && l[LabelPipeline] == p.Name && l[LabelPipelineNamespace] == p.Namespace &&
		ref != nil && ref.Namespace == pvc.Namespace && ref.Name == pvc.Name && pvc.Namespace == p.Namespace
}

// PVC is the claim every step of p mounts: bound to the volume named volume (as PV; empty is
// PVName(p)) for NFS, CSI and ModelStorageClass storage, provisioned by the StorageClass
// modelStorage.storageClass.name for StorageClass storage.
func PVC(p *pipelinev1.Pipeline, volume string) *corev1ac.PersistentVolumeClaimApplyConfiguration {
	spec := corev1ac.PersistentVolumeClaimSpec().
		WithAccessModes(accessModes(p)...).
		WithResources(corev1ac.VolumeResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceStorage: capacity(p)}))
	if StorageType(p) == pipelinev1.ModelStorageTypeStorageClass {
		spec.WithStorageClassName(storageClassName(p))
	} else {
		spec.WithStorageClassName("").WithVolumeName(cmp.Or(volume, PVName(p)))
	}
	return corev1ac.PersistentVolumeClaim(ClaimName(p), p.Namespace).
		WithLabels(storageLabels(p)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(spec)
}

// storageClassName is the StorageClass that provisions the claim of StorageClass storage.
func storageClassName(p *pipelinev1.Pipeline) string {
	if c := p.Spec.ModelStorage.StorageClass; c != nil {
		return c.Name
	}
	return ""
}
