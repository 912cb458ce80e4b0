package resources

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// The names of the operator's storage (PVName, LegacyPVName, ClaimName) hash the storage spec
// as v1beta1 said it, the version the operator read before it read v1. A Pipeline must keep
// them across that change: a new name is a new claim, and for StorageClass storage a new claim
// starts empty. storageV1beta1 gives the v1beta1 form of a v1 Pipeline's storage back, as the
// v1beta1 conversion (api/v1beta1, storageFrom and storageTo) makes it.

// Values of v1beta1's modelStorage.type.
const (
	v1beta1NFS               = "nfs"
	v1beta1CSI               = "csi"
	v1beta1StorageClass      = "storageClass"
	v1beta1ExistingClaim     = "existingClaim"
	v1beta1ModelStorageClass = "modelStorageClass"
)

// v1beta1StorageTypes are v1beta1's names of the v1 storage types.
var v1beta1StorageTypes = map[pipelinev1.ModelStorageType]string{
	pipelinev1.ModelStorageTypeNFS:               v1beta1NFS,
	pipelinev1.ModelStorageTypeCSI:               v1beta1CSI,
	pipelinev1.ModelStorageTypeStorageClass:      v1beta1StorageClass,
	pipelinev1.ModelStorageTypeExistingClaim:     v1beta1ExistingClaim,
	pipelinev1.ModelStorageTypeModelStorageClass: v1beta1ModelStorageClass,
}

// Keys of v1beta1's csiParameter: the export of nfs storage, the driver of csi storage (its
// other entries are the volume's attributes).
const (
	nfsServerParameter = "server"
	nfsShareParameter  = "share"
	csiDriverParameter = "driver"
)

// v1beta1Storage is v1beta1's modelStorage, in its JSON form too: the form in which the
// conversion data (ConversionDataAnnotation) keeps the storage of a Pipeline made in v1beta1.
type v1beta1Storage struct {
	Type                  string                              `json:"type,omitempty"`
	CSIParameter          map[string]string                   `json:"csiParameter,omitempty"`
	StorageClassName      string                              `json:"storageClassName,omitempty"`
	ClaimName             string                              `json:"claimName,omitempty"`
	ModelStorageClassName string                              `json:"modelStorageClassName,omitempty"`
	Capacity              *resource.Quantity                  `json:"capacity,omitempty"`
	AccessModes           []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
	MountPath             string                              `json:"mountPath,omitempty"`
}

// storageV1beta1 is the storage of p as v1beta1 says it: the storage the conversion data keeps
// of a Pipeline made in v1beta1 when it still converts to the storage of p (v1 cannot say csi
// storage without a driver, nor csiParameter entries or names the type does not read), else the
// storage of p converted to v1beta1.
func storageV1beta1(p *pipelinev1.Pipeline) v1beta1Storage {
	m := p.Spec.ModelStorage
	if kept := keptStorage(p); kept != nil && apiequality.Semantic.DeepEqual(kept.v1(), m) {
		return *kept
	}
	return fromV1(m)
}

// keptStorage is the v1beta1 storage the conversion data of p keeps; nil when it keeps none.
func keptStorage(p *pipelinev1.Pipeline) *v1beta1Storage {
	data, ok := p.Annotations[pipelinev1.ConversionDataAnnotation]
	if !ok {
		return nil
	}
	var kept struct {
		ModelStorage *v1beta1Storage `json:"modelStorage"`
	}
	if json.Unmarshal([]byte(data), &kept) != nil {
		return nil
	}
	return kept.ModelStorage
}

// fromV1 is the v1beta1 form of v1 storage m: every member's fields, csiParameter made of the
// NFS export and of the CSI driver and attributes.
func fromV1(m pipelinev1.ModelStorage) v1beta1Storage {
	out := v1beta1Storage{Type: string(m.Type), MountPath: m.MountPath}
	if t, ok := v1beta1StorageTypes[m.Type]; ok {
		out.Type = t
	}
	params := map[string]string{}
	if s := m.NFS; s != nil {
		if s.Server != "" {
			params[nfsServerParameter] = s.Server
		}
		if s.Path != "" {
			params[nfsShareParameter] = s.Path
		}
		out.Capacity, out.AccessModes = s.Capacity, s.AccessModes
	}
	if s := m.CSI; s != nil {
		for k, v := range s.VolumeAttributes {
			params[k] = v
		}
		params[csiDriverParameter] = s.Driver
		out.Capacity, out.AccessModes = s.Capacity, s.AccessModes
	}
	if s := m.StorageClass; s != nil {
		out.StorageClassName, out.Capacity, out.AccessModes = s.Name, s.Capacity, s.AccessModes
	}
	if s := m.ExistingClaim; s != nil {
		out.ClaimName = s.Name
	}
	if s := m.ModelStorageClass; s != nil {
		out.ModelStorageClassName, out.Capacity, out.AccessModes = s.Name, s.Capacity, s.AccessModes
	}
	if len(params) > 0 {
		out.CSIParameter = params
	}
	return out
}

// v1 is s converted to v1: the member its type names, read from the fields that type reads.
func (s v1beta1Storage) v1() pipelinev1.ModelStorage {
	t := s.effectiveType()
	out := pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageType(t), MountPath: s.MountPath}
	for v1Type, name := range v1beta1StorageTypes {
		if name == t {
			out.Type = v1Type
		}
	}
	params := s.CSIParameter
	switch t {
	case v1beta1NFS:
		out.NFS = &pipelinev1.NFSStorage{Server: params[nfsServerParameter], Path: params[nfsShareParameter],
			Capacity: s.Capacity, AccessModes: s.AccessModes}
	case v1beta1CSI:
		driver := params[csiDriverParameter]
		if driver == "" {
			driver = pipelinev1.DefaultCSIDriver
		}
		var attributes map[string]string
		for k, v := range params {
			if k == csiDriverParameter {
				continue
			}
			if attributes == nil {
				attributes = map[string]string{}
			}
			attributes[k] = v
		}
		out.CSI = &pipelinev1.CSIStorage{Driver: driver, VolumeAttributes: attributes, Capacity: s.Capacity, AccessModes: s.AccessModes}
	case v1beta1StorageClass:
		out.StorageClass = &pipelinev1.StorageClassStorage{Name: s.StorageClassName, Capacity: s.Capacity, AccessModes: s.AccessModes}
	case v1beta1ExistingClaim:
		out.ExistingClaim = &pipelinev1.ExistingClaimStorage{Name: s.ClaimName}
	case v1beta1ModelStorageClass:
		out.ModelStorageClass = &pipelinev1.ModelStorageClassStorage{Name: s.ModelStorageClassName, Capacity: s.Capacity,
			AccessModes: s.AccessModes}
	}
	return out
}

// effectiveType is the storage type, nfs when unset.
func (s v1beta1Storage) effectiveType() string {
	if s.Type != "" {
		return s.Type
	}
	return v1beta1NFS
}

// effectiveCapacity is the size of the volume and the claim.
func (s v1beta1Storage) effectiveCapacity() resource.Quantity {
	if s.Capacity != nil {
		return *s.Capacity
	}
	return resource.MustParse(pipelinev1.DefaultCapacity)
}

// effectiveAccessModes are the access modes of the volume and the claim.
func (s v1beta1Storage) effectiveAccessModes() []corev1.PersistentVolumeAccessMode {
	if len(s.AccessModes) > 0 {
		return s.AccessModes
	}
	return []corev1.PersistentVolumeAccessMode{pipelinev1.DefaultAccessMode}
}
