package pipeline

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
	pipelineadmission "github.com/ndsl-cn/pipeline-operator/internal/admission"
)

// storageClassRefusal is what both the CRD's CEL rule and the validating webhook say when an
// update would replace the claim of storageClass storage.
const storageClassRefusal = "modelStorage of type storageClass cannot change"

// An update that would give storageClass storage a new claim (its name follows every storage
// field but mountPath) is refused by the CRD itself and by the validating webhook, which names
// the field; every other storage change stays allowed. Each case also checks that the claim
// keeps its name exactly when the update is accepted.
func TestStorageClassClaimCannotBeReplaced(t *testing.T) {
	admission := loadCRDAdmission(t)
	byClass := func(m *pipelinev1.ModelStorage) {
		*m = pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeStorageClass, StorageClassName: "fast",
			Capacity: ptr.To(resource.MustParse("5Gi")), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}
	}
	nfs := func(*pipelinev1.ModelStorage) {} // the sample's
	for _, tc := range []struct {
		name   string
		stored func(*pipelinev1.ModelStorage)
		edit   func(*pipelinev1.ModelStorage)
		field  string // the field the webhook refuses; empty: accepted
	}{
		{"storageClass: capacity raised", byClass,
			func(m *pipelinev1.ModelStorage) { m.Capacity = ptr.To(resource.MustParse("10Gi")) }, "spec.modelStorage.capacity"},
		{"storageClass: capacity dropped (the default 1Gi)", byClass,
			func(m *pipelinev1.ModelStorage) { m.Capacity = nil }, "spec.modelStorage.capacity"},
		{"storageClass: another class", byClass,
			func(m *pipelinev1.ModelStorage) { m.StorageClassName = "slow" }, "spec.modelStorage.storageClassName"},
		{"storageClass: other access modes", byClass,
			func(m *pipelinev1.ModelStorage) { m.AccessModes = nil }, "spec.modelStorage.accessModes"},
		{"storageClass: csiParameter added", byClass,
			func(m *pipelinev1.ModelStorage) { m.CSIParameter = map[string]string{"tier": "gold"} }, "spec.modelStorage.csiParameter"},
		{"storageClass to existingClaim", byClass, func(m *pipelinev1.ModelStorage) {
			*m = pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeExistingClaim, ClaimName: "copied-models"}
		}, "spec.modelStorage.type"},
		{"storageClass to nfs", byClass, func(m *pipelinev1.ModelStorage) {
			*m = pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeNFS,
				CSIParameter: map[string]string{"server": "10.0.0.2", "share": "/models"}}
		}, "spec.modelStorage.type"},
		{"storageClass to the omitted type (nfs)", byClass, func(m *pipelinev1.ModelStorage) {
			*m = pipelinev1.ModelStorage{CSIParameter: map[string]string{"server": "10.0.0.2", "share": "/models"}}
		}, "spec.modelStorage.type"},
		{"storageClass to modelStorageClass", byClass, func(m *pipelinev1.ModelStorage) {
			*m = pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeModelStorageClass, ModelStorageClassName: "shared-models"}
		}, "spec.modelStorage.type"},
		{"storageClass: mountPath moved", byClass, func(m *pipelinev1.ModelStorage) { m.MountPath = "/data/models" }, ""},
		{"storageClass: the default capacity written out", func(m *pipelinev1.ModelStorage) {
			byClass(m)
			m.Capacity = nil
		}, func(m *pipelinev1.ModelStorage) { m.Capacity = ptr.To(resource.MustParse("1Gi")) }, ""},
		{"nfs: another server", nfs, func(m *pipelinev1.ModelStorage) { m.CSIParameter["server"] = "10.0.0.3" }, ""},
		{"nfs: capacity raised", nfs, func(m *pipelinev1.ModelStorage) { m.Capacity = ptr.To(resource.MustParse("10Gi")) }, ""},
		{"nfs to storageClass", nfs, byClass, ""},
		{"nfs to modelStorageClass", nfs, func(m *pipelinev1.ModelStorage) {
			*m = pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeModelStorageClass, ModelStorageClassName: "shared-models"}
		}, ""},
		{"modelStorageClass: another class", func(m *pipelinev1.ModelStorage) {
			*m = pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeModelStorageClass, ModelStorageClassName: "shared-models"}
		}, func(m *pipelinev1.ModelStorage) { m.ModelStorageClassName = "other-models" }, ""},
		{"csi: another share", func(m *pipelinev1.ModelStorage) {
			*m = pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeCSI,
				CSIParameter: map[string]string{"server": "10.0.0.2", "share": "/models"}}
		}, func(m *pipelinev1.ModelStorage) { m.CSIParameter["share"] = "/models-v2" }, ""},
		{"existingClaim: another claim", func(m *pipelinev1.ModelStorage) {
			*m = pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeExistingClaim, ClaimName: "models-a"}
		}, func(m *pipelinev1.ModelStorage) { m.ClaimName = "models-b" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := testenv.Sample(t, "default")
			tc.stored(&old.Spec.ModelStorage)
			stored, errs := admission.admit(old)
			if len(errs) > 0 {
				t.Fatalf("the stored Pipeline is refused: %v", errs)
			}
			p := stored.DeepCopy()
			tc.edit(&p.Spec.ModelStorage)

			_, celErrs := admission.admitUpdate(stored, p)
			hookErrs := pipelineadmission.ValidatePipelineUpdate(stored, p)
			if tc.field == "" {
				if len(celErrs) > 0 || len(hookErrs) > 0 {
					t.Fatalf("refused: CRD %v, webhook %v", celErrs, hookErrs)
				}
				if resources.StorageType(stored) == pipelinev1.StorageTypeStorageClass && resources.ClaimName(p) != resources.ClaimName(stored) {
					t.Errorf("accepted, but the claim changes from %s to %s", resources.ClaimName(stored), resources.ClaimName(p))
				}
				return
			}
			if len(celErrs) != 1 || celErrs[0].Field != "spec.modelStorage" || !strings.Contains(celErrs[0].Error(), storageClassRefusal) {
				t.Errorf("CRD errors %v, want the storageClass rule on spec.modelStorage", celErrs)
			}
			if len(hookErrs) != 1 || hookErrs[0].Field != tc.field || !strings.Contains(hookErrs[0].Error(), storageClassRefusal) ||
				!strings.Contains(hookErrs[0].Error(), "modelStorage.type existingClaim") {
				t.Errorf("webhook errors %v, want one on %s that says how to move", hookErrs, tc.field)
			}
			if resources.ClaimName(p) == resources.ClaimName(stored) {
				t.Errorf("refused, though the claim %s would stay", resources.ClaimName(p))
			}
		})
	}
}
