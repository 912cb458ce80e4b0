package admission

import (
	"testing"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

func TestV1beta1Path(t *testing.T) {
	// The seed Pipeline, made in v1beta1: its first step's env entry listenPort was an arg.
	seed, err := samples.Pipeline("default")
	if err != nil {
		t.Fatal(err)
	}
	plain := &pipelinev1.Pipeline{}
	for _, tc := range []struct {
		path string
		p    *pipelinev1.Pipeline
		want string
	}{
		{"spec.steps[0].image", seed, "spec.steps[0].image"},
		{"spec.steps[0].env[listenPort]", seed, "spec.steps[0].args[listenPort]"},
		{"spec.steps[0].env[listenPort].name", seed, "spec.steps[0].args[listenPort]"},
		{"spec.steps[0].env[listenPort].value", seed, "spec.steps[0].args[listenPort]"},
		{"spec.steps[0].env[listenPortX]", seed, "spec.steps[0].env[listenPortX]"},
		{"spec.steps[1].env[listenPort]", seed, "spec.steps[1].env[listenPort]"},
		{"spec.steps[0].env[listenPort]", plain, "spec.steps[0].env[listenPort]"},
		{"spec.steps[0].env[A=B].name", seed, "spec.steps[0].env[A=B].name"},
		{"spec.dataPath.mode", plain, "spec.router.enabled"},
		{"spec.dataPath", plain, "spec.router"},
		{"spec.dataPath.router", plain, "spec.router"},
		{"spec.dataPath.router.replicas", plain, "spec.router.replicas"},
		{"spec.dataPath.router.fallbackLocations[1]", plain, "spec.router.fallbackLocations[1]"},
		{"spec.dataPath.router.resources.requests[memory]", plain, "spec.router.resources.requests[memory]"},
		{"spec.modelStorage.nfs.server", plain, "spec.modelStorage.csiParameter[server]"},
		{"spec.modelStorage.nfs.path", plain, "spec.modelStorage.csiParameter[share]"},
		{"spec.modelStorage.csi.driver", plain, "spec.modelStorage.csiParameter[driver]"},
		{"spec.modelStorage.csi.volumeAttributes[bucket]", plain, "spec.modelStorage.csiParameter[bucket]"},
		{"spec.modelStorage.csi.volumeAttributes", plain, "spec.modelStorage.csiParameter"},
		{"spec.modelStorage.storageClass.name", plain, "spec.modelStorage.storageClassName"},
		{"spec.modelStorage.existingClaim.name", plain, "spec.modelStorage.claimName"},
		{"spec.modelStorage.modelStorageClass.name", plain, "spec.modelStorage.modelStorageClassName"},
		{"spec.modelStorage.storageClass.capacity", plain, "spec.modelStorage.capacity"},
		{"spec.modelStorage.nfs.accessModes[0]", plain, "spec.modelStorage.accessModes[0]"},
		{"spec.modelStorage.modelStorageClass.accessModes", plain, "spec.modelStorage.accessModes"},
		{"spec.modelStorage.csi.capacity", plain, "spec.modelStorage.capacity"},
		{"spec.modelStorage.mountPath", plain, "spec.modelStorage.mountPath"},
		{"spec.modelStorage.type", plain, "spec.modelStorage.type"},
		{"spec.modelStorage.nfs.serverName", plain, "spec.modelStorage.nfs.serverName"},
		{"spec.dataPathway", plain, "spec.dataPathway"},
	} {
		if got := v1beta1Path(tc.path, tc.p); got != tc.want {
			t.Errorf("v1beta1Path(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// A v1 request keeps the v1 fields and spellings; a v1beta1 request gets v1beta1's.
func TestFieldNames(t *testing.T) {
	p := &pipelinev1.Pipeline{}
	for _, tc := range []struct {
		n                             fieldNames
		path, prose, storageClassType string
	}{
		{fieldNames{}, "spec.modelStorage.existingClaim.name", "modelStorage.existingClaim.name", "StorageClass"},
		{fieldNames{v1beta1: p}, "spec.modelStorage.claimName", "modelStorage.claimName", "storageClass"},
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
