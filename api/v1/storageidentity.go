package v1

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The storage identity is what the names of the operator's model storage objects (the
// PersistentVolume and the claim) hash, after the Pipeline's namespace and name: a Pipeline keeps
// those names, and with them its claim, for as long as its identity stays the same. A new name
// is a new claim, and for StorageClass storage a new claim starts empty. The recipe
// (StorageIdentity.Parts) and its spellings are fixed since the first release: every release
// must give an unchanged Pipeline the parts an earlier one gave it.
//
// The identity of a Pipeline is the recipe applied to its spec.modelStorage (StorageIdentityOf),
// unless StorageIdentityAnnotation records other parts for the storage the spec describes now.
// The conversion of an earlier API version records them for a Pipeline whose storage that
// version said in a form the recipe does not see (its names were given from that form), and the
// operator migrates Pipelines stored before the annotation existed.

// Spellings of the storage identity, fixed since the first release: the storage types and the
// parameter keys as the first API version named them.
const (
	// IdentityTypeNFS is the identity's type of NFS storage (also of storage that names no type).
	IdentityTypeNFS = "nfs"
	// IdentityTypeCSI is the identity's type of CSI storage.
	IdentityTypeCSI = "csi"
	// IdentityTypeStorageClass is the identity's type of StorageClass storage.
	IdentityTypeStorageClass = "storageClass"
	// IdentityTypeExistingClaim is the identity's type of ExistingClaim storage.
	IdentityTypeExistingClaim = "existingClaim"
	// IdentityTypeModelStorageClass is the identity's type of ModelStorageClass storage.
	IdentityTypeModelStorageClass = "modelStorageClass"

	// IdentityServerParameter is the parameter holding an NFS export's server.
	IdentityServerParameter = "server"
	// IdentityShareParameter is the parameter holding an NFS export's path.
	IdentityShareParameter = "share"
	// IdentityDriverParameter is the parameter holding a CSI volume's driver; a CSI volume's
	// attributes are parameters of their own names.
	IdentityDriverParameter = "driver"
)

// identityTypes are the identity's spellings of the storage types.
var identityTypes = map[ModelStorageType]string{
	ModelStorageTypeNFS:               IdentityTypeNFS,
	ModelStorageTypeCSI:               IdentityTypeCSI,
	ModelStorageTypeStorageClass:      IdentityTypeStorageClass,
	ModelStorageTypeExistingClaim:     IdentityTypeExistingClaim,
	ModelStorageTypeModelStorageClass: IdentityTypeModelStorageClass,
}

// StorageIdentity holds the fields of model storage that identify it, each in the identity's
// spelling, before defaults. It is no API type: nothing stores it.
// +kubebuilder:object:generate=false
type StorageIdentity struct {
	// Type is the storage type (IdentityTypeNFS, ...); empty is IdentityTypeNFS.
	Type string
	// StorageClassName is the StorageClass that provisions the claim.
	StorageClassName string
	// Capacity is the size of the volume and claim; nil is DefaultCapacity.
	Capacity *resource.Quantity
	// AccessModes are those of the volume and claim; none is DefaultAccessMode.
	AccessModes []corev1.PersistentVolumeAccessMode
	// Parameters describe the volume: an NFS export's server and share, a CSI volume's driver
	// and attributes.
	Parameters map[string]string
	// ModelStorageClassName is the ModelStorageClass the volume is made from.
	ModelStorageClassName string
}

// Parts are the identity as the names hash it: the type, the StorageClass, the capacity, the
// access modes, every parameter as key=value in the order of the keys, and for ModelStorageClass
// storage only, modelStorageClass=<name> (the identity of the other types stays what it was
// before the type existed).
func (s StorageIdentity) Parts() []string {
	t := s.Type
	if t == "" {
		t = IdentityTypeNFS
	}
	size := resource.MustParse(DefaultCapacity)
	if s.Capacity != nil {
		size = *s.Capacity
	}
	modes := s.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{DefaultAccessMode}
	}
	parts := []string{t, s.StorageClassName, size.String()}
	for _, m := range modes {
		parts = append(parts, string(m))
	}
	keys := make([]string, 0, len(s.Parameters))
	for k := range s.Parameters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+s.Parameters[k])
	}
	if t == IdentityTypeModelStorageClass && s.ModelStorageClassName != "" {
		parts = append(parts, IdentityTypeModelStorageClass+"="+s.ModelStorageClassName)
	}
	return parts
}

// StorageIdentityOf is the identity of storage m by the recipe: the type in the identity's
// spelling (one it does not know as it is), an NFS export's server and path as the parameters
// server and share, a CSI volume's attributes and its driver as parameters, the StorageClass and
// ModelStorageClass names, and the capacity and access modes of the member that sets them.
func StorageIdentityOf(m ModelStorage) StorageIdentity {
	out := StorageIdentity{Type: string(m.Type)}
	if t, ok := identityTypes[m.Type]; ok {
		out.Type = t
	}
	params := map[string]string{}
	if s := m.NFS; s != nil {
		if s.Server != "" {
			params[IdentityServerParameter] = s.Server
		}
		if s.Path != "" {
			params[IdentityShareParameter] = s.Path
		}
		out.Capacity, out.AccessModes = s.Capacity, s.AccessModes
	}
	if s := m.CSI; s != nil {
		for k, v := range s.VolumeAttributes {
			params[k] = v
		}
		params[IdentityDriverParameter] = s.Driver
		out.Capacity, out.AccessModes = s.Capacity, s.AccessModes
	}
	if s := m.StorageClass; s != nil {
		out.StorageClassName, out.Capacity, out.AccessModes = s.Name, s.Capacity, s.AccessModes
	}
	if s := m.ModelStorageClass; s != nil {
		out.ModelStorageClassName, out.Capacity, out.AccessModes = s.Name, s.Capacity, s.AccessModes
	}
	if len(params) > 0 {
		out.Parameters = params
	}
	return out
}

// StorageFingerprint identifies storage m for StorageIdentityAnnotation: the SHA-256 (hex) of
// the parts of StorageIdentityOf(m), each preceded by its length. It changes whenever the names
// the recipe gives m change, and only then: defaults written into the spec after the identity
// was recorded (a capacity of 1Gi, access mode ReadOnlyMany) and a new mountPath keep it.
func StorageFingerprint(m ModelStorage) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range StorageIdentityOf(m).Parts() {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// recordedIdentity is the value of StorageIdentityAnnotation.
type recordedIdentity struct {
	Parts   []string `json:"parts"`
	Storage string   `json:"storage"`
}

// StorageIdentity is the identity of p's model storage: the parts StorageIdentityAnnotation
// records for the storage p's spec describes now (RecordedStorageIdentity), else those of the
// recipe (StorageIdentityOf).
func (p *Pipeline) StorageIdentity() []string {
	if parts, ok := p.RecordedStorageIdentity(); ok {
		return parts
	}
	return StorageIdentityOf(p.Spec.ModelStorage).Parts()
}

// RecordedStorageIdentity is the identity StorageIdentityAnnotation records, when it parses and
// was recorded for the storage p's spec describes now.
func (p *Pipeline) RecordedStorageIdentity() ([]string, bool) {
	raw, ok := p.Annotations[StorageIdentityAnnotation]
	if !ok {
		return nil, false
	}
	var r recordedIdentity
	if json.Unmarshal([]byte(raw), &r) != nil || len(r.Parts) == 0 || r.Storage != StorageFingerprint(p.Spec.ModelStorage) {
		return nil, false
	}
	return r.Parts, true
}

// SetStorageIdentity records parts as the identity of p's storage, for the storage p's spec
// describes now. It returns whether it changed p.
func (p *Pipeline) SetStorageIdentity(parts []string) bool {
	raw, err := json.Marshal(recordedIdentity{Parts: slices.Clone(parts), Storage: StorageFingerprint(p.Spec.ModelStorage)})
	if err != nil {
		return false // a list of strings always encodes
	}
	if old, ok := p.Annotations[StorageIdentityAnnotation]; ok && old == string(raw) {
		return false
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[StorageIdentityAnnotation] = string(raw)
	return true
}

// StorageIdentityPending is true while the identity of p's storage may be other than the
// recipe's and is not recorded yet: its conversion data (ConversionDataAnnotation) keeps the
// storage as an earlier API version said it, and StorageIdentityAnnotation is absent. The
// operator then neither creates nor moves p's storage: the names it would give it may not be
// those of p's claim.
func (p *Pipeline) StorageIdentityPending() bool {
	if _, recorded := p.Annotations[StorageIdentityAnnotation]; recorded {
		return false
	}
	data, ok := p.Annotations[ConversionDataAnnotation]
	if !ok {
		return false
	}
	var kept map[string]json.RawMessage
	if json.Unmarshal([]byte(data), &kept) != nil {
		return false
	}
	storage, ok := kept["modelStorage"]
	return ok && !bytes.Equal(bytes.TrimSpace(storage), []byte("null"))
}
