package v1beta1

// EffectiveType is the storage type, nfs when unset.
func (m *ModelStorage) EffectiveType() StorageType {
	if m.Type != "" {
		return m.Type
	}
	return StorageTypeNFS
}
