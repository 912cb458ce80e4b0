package pipeline

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelineadmission "github.com/ndsl-cn/pipeline-operator/internal/admission"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// storageClassRefusal is what both the CRD's CEL rule and the validating webhook say when an
// update would replace the claim of StorageClass storage.
const storageClassRefusal = "modelStorage of type StorageClass cannot change"

// An update that would give StorageClass storage a new claim (its name follows every storage
// field but mountPath) is refused by the CRD itself and by the validating webhook, which names
// the field; every other storage change stays allowed. Each case also checks that the claim
// keeps its name exactly when the update is accepted.
func TestStorageClassClaimCannotBeReplaced(t *testing.T) {
	admission := loadCRDAdmission(t)
	byClass := func(m *pipelinev1.ModelStorage) {
		*m = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass, StorageClass: &pipelinev1.StorageClassStorage{
			Name: "fast", Capacity: ptr.To(resource.MustParse("5Gi")), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}}
	}
	nfs := func(*pipelinev1.ModelStorage) {} // the sample's
	toNFS := func(m *pipelinev1.ModelStorage) {
		*m = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS, NFS: &pipelinev1.NFSStorage{Server: "10.0.0.2", Path: "/models"}}
	}
	toCSI := func(m *pipelinev1.ModelStorage) {
		*m = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI, CSI: &pipelinev1.CSIStorage{Driver: pipelinev1.DefaultCSIDriver,
			VolumeAttributes: map[string]string{"server": "10.0.0.2", "share": "/models"}}}
	}
	toClass := func(name string) func(*pipelinev1.ModelStorage) {
		return func(m *pipelinev1.ModelStorage) {
			*m = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
				ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: name}}
		}
	}
	toClaim := func(name string) func(*pipelinev1.ModelStorage) {
		return func(m *pipelinev1.ModelStorage) {
			*m = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim, ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: name}}
		}
	}
	for _, tc := range []struct {
		name   string
		stored func(*pipelinev1.ModelStorage)
		edit   func(*pipelinev1.ModelStorage)
		field  string // the field the webhook refuses; empty: accepted
	}{
		{"StorageClass: capacity raised", byClass,
			func(m *pipelinev1.ModelStorage) { m.StorageClass.Capacity = ptr.To(resource.MustParse("10Gi")) }, "spec.modelStorage.storageClass.capacity"},
		{"StorageClass: capacity dropped (the default 1Gi)", byClass,
			func(m *pipelinev1.ModelStorage) { m.StorageClass.Capacity = nil }, "spec.modelStorage.storageClass.capacity"},
		{"StorageClass: another class", byClass,
			func(m *pipelinev1.ModelStorage) { m.StorageClass.Name = "slow" }, "spec.modelStorage.storageClass.name"},
		{"StorageClass: other access modes", byClass,
			func(m *pipelinev1.ModelStorage) { m.StorageClass.AccessModes = nil }, "spec.modelStorage.storageClass.accessModes"},
		// v1beta1's csiParameter, which named the claim too, is no field of v1's storageClass:
		// what is left to add is another access mode.
		{"StorageClass: an access mode added", byClass, func(m *pipelinev1.ModelStorage) {
			m.StorageClass.AccessModes = append(m.StorageClass.AccessModes, corev1.ReadOnlyMany)
		}, "spec.modelStorage.storageClass.accessModes"},
		{"StorageClass to ExistingClaim", byClass, toClaim("copied-models"), "spec.modelStorage.type"},
		{"StorageClass to NFS", byClass, toNFS, "spec.modelStorage.type"},
		// v1 has no omitted type (v1beta1's meant nfs): the other member left is csi.
		{"StorageClass to CSI", byClass, toCSI, "spec.modelStorage.type"},
		{"StorageClass to ModelStorageClass", byClass, toClass("shared-models"), "spec.modelStorage.type"},
		{"StorageClass: mountPath moved", byClass, func(m *pipelinev1.ModelStorage) { m.MountPath = "/data/models" }, ""},
		{"StorageClass: the default capacity written out", func(m *pipelinev1.ModelStorage) {
			byClass(m)
			m.StorageClass.Capacity = nil
		}, func(m *pipelinev1.ModelStorage) { m.StorageClass.Capacity = ptr.To(resource.MustParse("1Gi")) }, ""},
		{"NFS: another server", nfs, func(m *pipelinev1.ModelStorage) { m.NFS.Server = "10.0.0.3" }, ""},
		{"NFS: capacity raised", nfs, func(m *pipelinev1.ModelStorage) { m.NFS.Capacity = ptr.To(resource.MustParse("10Gi")) }, ""},
		{"NFS to StorageClass", nfs, byClass, ""},
		{"NFS to ModelStorageClass", nfs, toClass("shared-models"), ""},
		{"ModelStorageClass: another class", toClass("shared-models"),
			func(m *pipelinev1.ModelStorage) { m.ModelStorageClass.Name = "other-models" }, ""},
		{"CSI: another share", toCSI, func(m *pipelinev1.ModelStorage) { m.CSI.VolumeAttributes["share"] = "/models-v2" }, ""},
		{"ExistingClaim: another claim", toClaim("models-a"), func(m *pipelinev1.ModelStorage) { m.ExistingClaim.Name = "models-b" }, ""},
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
				if stored.Spec.ModelStorage.Type == pipelinev1.ModelStorageTypeStorageClass && resources.ClaimName(p) != resources.ClaimName(stored) {
					t.Errorf("accepted, but the claim changes from %s to %s", resources.ClaimName(stored), resources.ClaimName(p))
				}
				return
			}
			if len(celErrs) != 1 || celErrs[0].Field != "spec.modelStorage" || !strings.Contains(celErrs[0].Error(), storageClassRefusal) {
				t.Errorf("CRD errors %v, want the StorageClass rule on spec.modelStorage", celErrs)
			}
			if len(hookErrs) != 1 || hookErrs[0].Field != tc.field || !strings.Contains(hookErrs[0].Error(), storageClassRefusal) ||
				!strings.Contains(hookErrs[0].Error(), "modelStorage.type ExistingClaim") {
				t.Errorf("webhook errors %v, want one on %s that says how to move", hookErrs, tc.field)
			}
			if resources.ClaimName(p) == resources.ClaimName(stored) {
				t.Errorf("refused, though the claim %s would stay", resources.ClaimName(p))
			}
		})
	}
}
