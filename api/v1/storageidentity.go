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
// (StorageIdentityParts) and its spellings are fixed since the first release: every release
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

// StorageIdentityParts are the identity of storage as the names hash it, from the fields that
// identify storage, each in the identity's spelling: the type (empty is IdentityTypeNFS), the
// StorageClass, the capacity (nil is DefaultCapacity), the access modes (none is
// DefaultAccessMode), every parameter as key=value in the order of the keys (an NFS export's
// server and share, a CSI volume's driver and attributes), and for ModelStorageClass storage
// only, modelStorageClass=<name> (the identity of the other types stays what it was before the
// type existed).
func StorageIdentityParts(storageType, storageClassName string, capacity *resource.Quantity,
	accessModes []corev1.PersistentVolumeAccessMode, parameters map[string]string, modelStorageClassName string) []string {
	if storageType == "" {
		storageType = IdentityTypeNFS
	}
	size := resource.MustParse(DefaultCapacity)
	if capacity != nil {
		size = *capacity
	}
	if len(accessModes) == 0 {
		accessModes = []corev1.PersistentVolumeAccessMode{DefaultAccessMode}
	}
	parts := []string{storageType, storageClassName, size.String()}
	for _, m := range accessModes {
		parts = append(parts, string(m))
	}
	keys := make([]string, 0, len(parameters))
	for k := range parameters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+parameters[k])
	}
	if storageType == IdentityTypeModelStorageClass && modelStorageClassName != "" {
		parts = append(parts, IdentityTypeModelStorageClass+"="+modelStorageClassName)
	}
	return parts
}

// StorageIdentityOf is the identity of storage m by the recipe (StorageIdentityParts): the type
// in the identity's spelling (one it does not know as it is), an NFS export's server and path as
// the parameters server and share, a CSI volume's attributes and its driver as parameters, the
// StorageClass and ModelStorageClass names, and the capacity and access modes of the member that
// sets them.
func StorageIdentityOf(m ModelStorage) []string {
	storageType := string(m.Type)
	if t, ok := identityTypes[m.Type]; ok {
		storageType = t
	}
	var class, modelStorageClass string
	var capacity *resource.Quantity
	var modes []corev1.PersistentVolumeAccessMode
	params := map[string]string{}
	if s := m.NFS; s != nil {
		if s.Server != "" {
			params[IdentityServerParameter] = s.Server
		}
		if s.Path != "" {
			params[IdentityShareParameter] = s.Path
		}
		capacity, modes = s.Capacity, s.AccessModes
	}
	if s := m.CSI; s != nil {
		for k, v := range s.VolumeAttributes {
			params[k] = v
		}
		params[IdentityDriverParameter] = s.Driver
		capacity, modes = s.Capacity, s.AccessModes
	}
	if s := m.StorageClass; s != nil {
		class, capacity, modes = s.Name, s.Capacity, s.AccessModes
	}
	if s := m.ModelStorageClass; s != nil {
		modelStorageClass, capacity, modes = s.Name, s.Capacity, s.AccessModes
	}
	return StorageIdentityParts(storageType, class, capacity, modes, params, modelStorageClass)
}

// StorageFingerprint identifies storage m for StorageIdentityAnnotation: the SHA-256 (hex) of
// StorageIdentityOf(m), each part preceded by its length. It changes whenever the names
// the recipe gives m change, and only then: defaults written into the spec after the identity
// was recorded (a capacity of 1Gi, access mode ReadOnlyMany) and a new mountPath keep it.
func StorageFingerprint(m ModelStorage) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range StorageIdentityOf(m) {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// StorageIdentity is the identity of p's model storage: the parts StorageIdentityAnnotation
// records for the storage p's spec describes now (RecordedStorageIdentity), else those of the
// recipe (StorageIdentityOf).
func (p *Pipeline) StorageIdentity() []string {
	if parts, ok := p.RecordedStorageIdentity(); ok {
		return parts
	}
	return StorageIdentityOf(p.Spec.ModelStorage)
}

// RecordedStorageIdentity is the identity StorageIdentityAnnotation records, when it parses and
// was recorded for the storage p's spec describes now.
func (p *Pipeline) RecordedStorageIdentity() ([]string, bool) {
	raw, ok := p.Annotations[StorageIdentityAnnotation]
	if !ok {
		return nil, false
	}
	var r struct {
		Parts   []string `json:"parts"`
		Storage string   `json:"storage"`
	}
	if json.Unmarshal([]byte(raw), &r) != nil || len(r.Parts) == 0 || r.Storage != StorageFingerprint(p.Spec.ModelStorage) {
		return nil, false
	}
	return r.Parts, true
}

// SetStorageIdentity records parts as the identity of p's storage, for the storage p's spec
// describes now. It returns whether it changed p.
func (p *Pipeline) SetStorageIdentity(parts []string) bool {
	raw, err := json.Marshal(struct {
		Parts   []string `json:"parts"`
		Storage string   `json:"storage"`
	}{Parts: slices.Clone(parts), Storage: StorageFingerprint(p.Spec.ModelStorage)})
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
