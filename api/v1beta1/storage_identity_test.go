package v1beta1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// The operator names a Pipeline's volume and claim after its storage identity: these tests
// convert v1beta1 Pipelines to v1, as the apiserver stores them, and compare the names of their
// storage with those the operator gave it when it read v1beta1.

// The names of the storage of a Pipeline made in v1beta1 are those the operator gave it when it
// read v1beta1, also for storage that v1 says otherwise (a csi driver v1beta1 left to its
// default, csiParameter entries and names the type does not read): new names would replace the
// claim.
func TestStorageNamesOfPipelinesMadeInV1beta1(t *testing.T) {
	tests := []struct {
		desc     string
		pipeline string
		storage  ModelStorage
		// The names the operator gave the storage when it read v1beta1.
		claim, legacyVolume, volume string
	}{{
		desc: "nfs", pipeline: "seed",
		storage: ModelStorage{Type: StorageTypeNFS, CSIParameter: map[string]string{"server": "192.168.20.235", "share": "/home/aiedge/csiTest"}},
		claim:   "seed-models-32b28d30", legacyVolume: "ns3-seed-32b28d30",
		volume: "ns3-seed-5b24b89b9d8463deb4d3b94f9950a0ef17d6d71f0c79be9a9fc1887733f36b17",
	}, {
		desc: "storageClass", pipeline: "sc-plain",
		storage: ModelStorage{Type: StorageTypeStorageClass, StorageClassName: "fast"},
		claim:   "sc-plain-models-13f92e92", legacyVolume: "ns3-sc-plain-13f92e92",
		volume: "ns3-sc-plain-1f8bacb0d1791642c3e8c1940eac2cb93ea55d5697e26fa2ba975fcc11f6bc65",
	}, {
		desc: "type left out: nfs", pipeline: "notype",
		storage: ModelStorage{CSIParameter: map[string]string{"server": "s", "share": "/x"}},
		claim:   "notype-models-65069d37", legacyVolume: "ns3-notype-65069d37",
		volume: "ns3-notype-44ddb1c07810a2daa1d4f27001d73658eb4ebaf34055b9b1463b83edbef07cb5",
	}, {
		desc: "csi without a driver or attributes", pipeline: "csi-nothing",
		storage: ModelStorage{Type: StorageTypeCSI},
		claim:   "csi-nothing-models-36ffb533", legacyVolume: "ns3-csi-nothing-36ffb533",
		volume: "ns3-csi-nothing-08d6fb599b47c8103180155905e6871bf7129dffb1dd0ab3e0ea4ccf7746f23c",
	}, {
		desc: "csi naming only its driver", pipeline: "csi-driver-only",
		storage: ModelStorage{Type: StorageTypeCSI, CSIParameter: map[string]string{"driver": "nfs.csi.k8s.io"}},
		claim:   "csi-driver-only-models-3ed6dc9b", legacyVolume: "ns3-csi-driver-only-3ed6dc9b",
		volume: "ns3-csi-driver-only-7e203ca83d84f51aa8b674b82ec5dae95ead9aa7880f7211288ca7155f633693",
	}, {
		desc: "nfs with a csiParameter entry and a class it does not read", pipeline: "nfs-extra",
		storage: ModelStorage{Type: StorageTypeNFS, StorageClassName: "stray",
			CSIParameter: map[string]string{"server": "s", "share": "/x", "extra": "y"}},
		claim: "nfs-extra-models-07ef95c8", legacyVolume: "ns3-nfs-extra-07ef95c8",
		volume: "ns3-nfs-extra-18279b8c77f16dcf009589774e4ece412493371b526e53f3a99cc0caa01c9ce0",
	}, {
		desc: "storageClass with a csiParameter it does not read", pipeline: "sc-stray",
		storage: ModelStorage{Type: StorageTypeStorageClass, StorageClassName: "fast",
			CSIParameter: map[string]string{"server": "s"}},
		claim: "sc-stray-models-7fc8b4e9", legacyVolume: "ns3-sc-stray-7fc8b4e9",
		volume: "ns3-sc-stray-2d57968953899162064b076b942f8884591e621b10f2708cb494851898aeff52",
	}}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			spoke := &Pipeline{ObjectMeta: metav1.ObjectMeta{Name: tt.pipeline, Namespace: "ns3"},
				Spec: PipelineSpec{
					Steps:        []Step{{Image: "i", Model: "m"}},
					ModelStorage: tt.storage,
				}}
			p := toV1(t, spoke)
			if got := resources.ClaimName(p); got != tt.claim {
				t.Errorf("claim %q, want %q", got, tt.claim)
			}
			if got := resources.LegacyPVName(p); got != tt.legacyVolume {
				t.Errorf("earlier volume name %q, want %q", got, tt.legacyVolume)
			}
			if got := resources.PVName(p); got != tt.volume {
				t.Errorf("volume %q, want %q", got, tt.volume)
			}
		})
	}
}

// Conversion data that no longer converts to the storage (the storage was changed in v1 since)
// names nothing: the storage is named by what it says now, as a Pipeline made in v1 is.
func TestStorageNamesAfterAChangeInV1(t *testing.T) {
	spoke := &Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "csi-nothing", Namespace: "ns3"},
		Spec: PipelineSpec{
			Steps:        []Step{{Image: "i", Model: "m"}},
			ModelStorage: ModelStorage{Type: StorageTypeCSI},
		}}
	p := toV1(t, spoke)
	if _, ok := p.Annotations[pipelinev1.ConversionDataAnnotation]; !ok {
		t.Fatal("the conversion keeps no data of a csi storage without driver")
	}
	before := resources.ClaimName(p)
	p.Spec.ModelStorage.CSI.VolumeAttributes = map[string]string{"share": "/models"}
	changed := resources.ClaimName(p)
	if changed == before {
		t.Errorf("another volume keeps the claim %q", before)
	}
	madeInV1 := p.DeepCopy()
	madeInV1.Annotations = nil
	if resources.ClaimName(madeInV1) != changed || resources.PVName(madeInV1) != resources.PVName(p) {
		t.Errorf("claim %q, volume %q; made in v1: %q, %q", changed, resources.PVName(p), resources.ClaimName(madeInV1), resources.PVName(madeInV1))
	}
}

// An identity recorded for the current storage stays; a Pipeline with nothing kept gets none;
// one whose kept storage no longer converts gets the recipe's, once.
func TestRecordStorageIdentity(t *testing.T) {
	spoke := &Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "csi-nothing", Namespace: "ns3"},
		Spec: PipelineSpec{Steps: []Step{{Image: "i", Model: "m"}}, ModelStorage: ModelStorage{Type: StorageTypeCSI}}}
	p := toV1(t, spoke)
	kept := []string{"csi", "", "1Gi", "ReadOnlyMany"}
	if diff := cmp.Diff(kept, p.StorageIdentity()); diff != "" {
		t.Fatalf("recorded on conversion (-want +got):\n%s", diff)
	}
	if RecordStorageIdentity(p) {
		t.Error("an identity recorded for the storage was recorded again")
	}

	// As the previous release stored it: the conversion data, no identity.
	stored := p.DeepCopy()
	delete(stored.Annotations, pipelinev1.StorageIdentityAnnotation)
	if !stored.StorageIdentityPending() || !RecordStorageIdentity(stored) || stored.StorageIdentityPending() {
		t.Fatal("the identity of a Pipeline stored before it existed is not recorded")
	}
	if diff := cmp.Diff(p.Annotations, stored.Annotations); diff != "" {
		t.Errorf("recorded (-conversion +migration):\n%s", diff)
	}

	// Changed in v1 before it was recorded: the recipe's identity, so that it is not pending.
	changed := p.DeepCopy()
	delete(changed.Annotations, pipelinev1.StorageIdentityAnnotation)
	changed.Spec.ModelStorage.CSI.VolumeAttributes = map[string]string{"share": "/models"}
	if !RecordStorageIdentity(changed) {
		t.Fatal("nothing recorded")
	}
	if diff := cmp.Diff(pipelinev1.StorageIdentityOf(changed.Spec.ModelStorage), changed.StorageIdentity()); diff != "" {
		t.Errorf("changed in v1 (-want +got):\n%s", diff)
	}

	// Changed in v1 after it was recorded: the record stays for the storage it names.
	p.Spec.ModelStorage.CSI.VolumeAttributes = map[string]string{"share": "/models"}
	if RecordStorageIdentity(p) {
		t.Error("a record of earlier storage was replaced")
	}

	// Nothing kept: nothing to record.
	plain := &pipelinev1.Pipeline{Spec: pipelinev1.PipelineSpec{ModelStorage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS,
		NFS: &pipelinev1.NFSStorage{Server: "s", Path: "/x"}}}}
	if RecordStorageIdentity(plain) || plain.Annotations != nil {
		t.Errorf("recorded on a Pipeline made in v1: %v", plain.Annotations)
	}
}

// The recorded identity goes through v1beta1 and back: dropped on the way when the way back
// records it again, kept otherwise (an identity recorded for storage v1beta1 now says
// otherwise).
func TestStorageIdentityRoundTrip(t *testing.T) {
	spoke := &Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "nfs-extra", Namespace: "ns3"},
		Spec: PipelineSpec{Steps: []Step{{Image: "i", Model: "m"}}, ModelStorage: ModelStorage{Type: StorageTypeNFS,
			CSIParameter: map[string]string{"server": "s", "share": "/x", "extra": "y"}}}}
	hub := toV1(t, spoke)
	back := &Pipeline{}
	if err := back.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	if _, ok := back.Annotations[pipelinev1.StorageIdentityAnnotation]; ok {
		t.Errorf("v1beta1 shows the identity its conversion records: %v", back.Annotations)
	}
	if diff := cmp.Diff(hub, toV1(t, back)); diff != "" {
		t.Errorf("v1 -> v1beta1 -> v1 (-want +got):\n%s", diff)
	}

	// Recorded from other v1beta1 storage of the same v1 storage (the stray entry renamed).
	hub.SetStorageIdentity([]string{"nfs", "", "1Gi", "ReadOnlyMany", "other=y", "server=s", "share=/x"})
	back = &Pipeline{}
	if err := back.ConvertFrom(hub); err != nil {
		t.Fatal(err)
	}
	if back.Annotations[pipelinev1.StorageIdentityAnnotation] != hub.Annotations[pipelinev1.StorageIdentityAnnotation] {
		t.Errorf("the identity is not kept in v1beta1: %v", back.Annotations)
	}
	if diff := cmp.Diff(hub, toV1(t, back)); diff != "" {
		t.Errorf("v1 -> v1beta1 -> v1 (-want +got):\n%s", diff)
	}
}
