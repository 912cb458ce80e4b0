package v1beta1

import "fmt"

// DefaultStepName is the name of the unnamed step at index i: step-<1-based index>.
func DefaultStepName(i int) string {
	return fmt.Sprintf("step-%d", i+1)
}

// EffectiveType is the storage type, nfs when unset.
func (m *ModelStorage) EffectiveType() StorageType {
	if m.Type != "" {
		return m.Type
	}
	return StorageTypeNFS
}
