package admission

import (
	"testing"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

func TestV1Path(t *testing.T) {
	typed := func(st pipelinev1.StorageType) *pipelinev1.Pipeline {
		return &pipelinev1.Pipeline{Spec: pipelinev1.PipelineSpec{ModelStorage: pipelinev1.ModelStorage{Type: st}}}
	}
	for _, tc := range []struct {
		path string
		p    *pipelinev1.Pipeline
		want string
	}{
		{"spec.steps[0].image", typed(pipelinev1.StorageTypeNFS), "spec.steps[0].image"},
		{"spec.steps[1].args[batch size]", typed(""), "spec.steps[1].env[batch size]"},
		{"spec.steps[1].args", typed(""), "spec.steps[1].env"},
		{"spec.steps[0].args[listenPort]", typed(""), "spec.steps[0].port"},
		{"spec.router.enabled", typed(""), "spec.dataPath.mode"},
		{"spec.router.replicas", typed(""), "spec.dataPath.router.replicas"},
		{"spec.modelStorage.csiParameter[server]", typed(pipelinev1.StorageTypeNFS), "spec.modelStorage.nfs.server"},
		{"spec.modelStorage.csiParameter[share]", typed(""), "spec.modelStorage.nfs.path"},
		{"spec.modelStorage.csiParameter[driver]", typed(pipelinev1.StorageTypeCSI), "spec.modelStorage.csi.driver"},
		{"spec.modelStorage.csiParameter[bucket]", typed(pipelinev1.StorageTypeCSI), "spec.modelStorage.csi.volumeAttributes[bucket]"},
		{"spec.modelStorage.csiParameter", typed(pipelinev1.StorageTypeNFS), "spec.modelStorage.nfs"},
		{"spec.modelStorage.storageClassName", typed(pipelinev1.StorageTypeStorageClass), "spec.modelStorage.storageClass.name"},
		{"spec.modelStorage.claimName", typed(pipelinev1.StorageTypeExistingClaim), "spec.modelStorage.existingClaim.name"},
		{"spec.modelStorage.modelStorageClassName", typed(pipelinev1.StorageTypeModelStorageClass), "spec.modelStorage.modelStorageClass.name"},
		{"spec.modelStorage.capacity", typed(pipelinev1.StorageTypeStorageClass), "spec.modelStorage.storageClass.capacity"},
		{"spec.modelStorage.accessModes[0]", typed(pipelinev1.StorageTypeCSI), "spec.modelStorage.csi.accessModes[0]"},
		{"spec.modelStorage.mountPath", typed(""), "spec.modelStorage.mountPath"},
		{"spec.modelStorage.type", typed(""), "spec.modelStorage.type"},
	} {
		if got := v1Path(tc.path, tc.p); got != tc.want {
			t.Errorf("v1Path(%q, type %q) = %q, want %q", tc.path, tc.p.Spec.ModelStorage.Type, got, tc.want)
		}
	}
}
