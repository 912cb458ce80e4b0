package v1beta1_test

import (
	"testing"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

func TestFieldSpellingPath(t *testing.T) {
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
		if got := (pipelinev1beta1.FieldSpelling{}).Path(tc.path, tc.p); got != tc.want {
			t.Errorf("Path(%q) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestFieldSpellingStorageTypes(t *testing.T) {
	for v1, want := range map[pipelinev1.ModelStorageType]string{
		pipelinev1.ModelStorageTypeNFS:               "nfs",
		pipelinev1.ModelStorageTypeCSI:               "csi",
		pipelinev1.ModelStorageTypeStorageClass:      "storageClass",
		pipelinev1.ModelStorageTypeExistingClaim:     "existingClaim",
		pipelinev1.ModelStorageTypeModelStorageClass: "modelStorageClass",
		"Unknown": "Unknown",
	} {
		if got := (pipelinev1beta1.FieldSpelling{}).StorageType(v1); got != want {
			t.Errorf("StorageType(%s) = %s, want %s", v1, got, want)
		}
	}
}
