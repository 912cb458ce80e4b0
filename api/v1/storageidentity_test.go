package v1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// The recipe's parts, in the spellings fixed since the first release.
func TestStorageIdentityOf(t *testing.T) {
	tests := []struct {
		name    string
		storage ModelStorage
		want    []string
	}{{
		name:    "nfs, defaults",
		storage: ModelStorage{Type: ModelStorageTypeNFS, NFS: &NFSStorage{Server: "192.168.20.235", Path: "/home/aiedge/csiTest"}},
		want:    []string{"nfs", "", "1Gi", "ReadOnlyMany", "server=192.168.20.235", "share=/home/aiedge/csiTest"},
	}, {
		name: "csi: attributes and driver, in the order of the keys",
		storage: ModelStorage{Type: ModelStorageTypeCSI, CSI: &CSIStorage{Driver: "nfs.csi.k8s.io",
			VolumeAttributes: map[string]string{"share": "/m", "server": "s"}, Capacity: ptr.To(resource.MustParse("5Gi")),
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadOnlyMany}}},
		want: []string{"csi", "", "5Gi", "ReadWriteMany", "ReadOnlyMany", "driver=nfs.csi.k8s.io", "server=s", "share=/m"},
	}, {
		name:    "storageClass",
		storage: ModelStorage{Type: ModelStorageTypeStorageClass, StorageClass: &StorageClassStorage{Name: "fast"}},
		want:    []string{"storageClass", "fast", "1Gi", "ReadOnlyMany"},
	}, {
		name:    "modelStorageClass names its class",
		storage: ModelStorage{Type: ModelStorageTypeModelStorageClass, ModelStorageClass: &ModelStorageClassStorage{Name: "shared"}},
		want:    []string{"modelStorageClass", "", "1Gi", "ReadOnlyMany", "modelStorageClass=shared"},
	}, {
		name:    "no type: nfs",
		storage: ModelStorage{NFS: &NFSStorage{Server: "s", Path: "/x"}},
		want:    []string{"nfs", "", "1Gi", "ReadOnlyMany", "server=s", "share=/x"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, StorageIdentityOf(tt.storage)); diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
		})
	}
}

// csiPipeline is a Pipeline whose csi storage names driver nfs.csi.k8s.io and an export.
func csiPipeline() *Pipeline {
	return &Pipeline{Spec: PipelineSpec{ModelStorage: ModelStorage{Type: ModelStorageTypeCSI,
		CSI: &CSIStorage{Driver: DefaultCSIDriver, VolumeAttributes: map[string]string{"server": "s", "share": "/x"}}}}}
}

// A recorded identity names the storage only while the storage is the one it was recorded for.
func TestRecordedStorageIdentity(t *testing.T) {
	p := csiPipeline()
	recipe := StorageIdentityOf(p.Spec.ModelStorage)
	if diff := cmp.Diff(recipe, p.StorageIdentity()); diff != "" {
		t.Fatalf("nothing recorded: the recipe's parts (-want +got):\n%s", diff)
	}
	recorded := []string{"csi", "", "1Gi", "ReadOnlyMany", "server=s", "share=/x"}
	if !p.SetStorageIdentity(recorded) {
		t.Fatal("recording changed nothing")
	}
	if p.SetStorageIdentity(recorded) {
		t.Error("recording the same identity again changed p")
	}
	if diff := cmp.Diff(recorded, p.StorageIdentity()); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}

	// Defaults written since, and another mount path, are the same storage.
	p.Default()
	p.Spec.ModelStorage.MountPath = "/data"
	if diff := cmp.Diff(recorded, p.StorageIdentity()); diff != "" {
		t.Errorf("after defaults and a new mount path (-want +got):\n%s", diff)
	}

	// Another export is other storage: the recipe names it; back to the export, the record again.
	p.Spec.ModelStorage.CSI.VolumeAttributes["server"] = "t"
	if _, ok := p.RecordedStorageIdentity(); ok {
		t.Error("the record applies to another export")
	}
	if diff := cmp.Diff(StorageIdentityOf(p.Spec.ModelStorage), p.StorageIdentity()); diff != "" {
		t.Errorf("another export (-want +got):\n%s", diff)
	}
	p.Spec.ModelStorage.CSI.VolumeAttributes["server"] = "s"
	if diff := cmp.Diff(recorded, p.StorageIdentity()); diff != "" {
		t.Errorf("the export again (-want +got):\n%s", diff)
	}

	// A value that does not parse records nothing.
	for _, v := range []string{"not json", `{"parts":[],"storage":"` + StorageFingerprint(p.Spec.ModelStorage) + `"}`, `{"parts":["x"]}`} {
		p.Annotations[StorageIdentityAnnotation] = v
		if _, ok := p.RecordedStorageIdentity(); ok {
			t.Errorf("%s records an identity", v)
		}
	}
}

func TestStorageIdentityPending(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        bool
	}{
		{name: "no conversion data"},
		{name: "conversion data of steps only", annotations: map[string]string{ConversionDataAnnotation: `{"steps":{"0":{"args":["a"]}}}`}},
		{name: "storage kept", annotations: map[string]string{ConversionDataAnnotation: `{"modelStorage":{"type":"csi"}}`}, want: true},
		{name: "storage kept, identity recorded", annotations: map[string]string{ConversionDataAnnotation: `{"modelStorage":{"type":"csi"}}`,
			StorageIdentityAnnotation: `{"parts":["csi","","1Gi","ReadOnlyMany"],"storage":"f"}`}},
		{name: "storage null", annotations: map[string]string{ConversionDataAnnotation: `{"modelStorage":null}`}},
		{name: "conversion data that does not parse", annotations: map[string]string{ConversionDataAnnotation: `{"modelStorage":`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := csiPipeline()
			p.Annotations = tt.annotations
			if got := p.StorageIdentityPending(); got != tt.want {
				t.Errorf("pending %v, want %v", got, tt.want)
			}
		})
	}
}
