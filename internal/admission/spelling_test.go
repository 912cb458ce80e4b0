package admission

import (
	"testing"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// A v1 request keeps the v1 fields and spellings; a v1beta1 request gets v1beta1's.
func TestFieldNames(t *testing.T) {
	p := &pipelinev1.Pipeline{}
	for _, tc := range []struct {
		n                             fieldNames
		path, prose, storageClassType string
	}{
		{fieldNames{}, "spec.modelStorage.existingClaim.name", "modelStorage.existingClaim.name", "StorageClass"},
		{fieldNames{spelling: spellings["v1beta1"], p: p}, "spec.modelStorage.claimName", "modelStorage.claimName", "storageClass"},
	} {
		if got := tc.n.path("spec.modelStorage.existingClaim.name"); got != tc.path {
			t.Errorf("path = %q, want %q", got, tc.path)
		}
		if got := tc.n.prose("spec.modelStorage.existingClaim.name"); got != tc.prose {
			t.Errorf("prose = %q, want %q", got, tc.prose)
		}
		if got := tc.n.storageType(pipelinev1.ModelStorageTypeStorageClass); got != tc.storageClassType {
			t.Errorf("storageType = %q, want %q", got, tc.storageClassType)
		}
	}
}
