package resources

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// The children of a Pipeline made in v1beta1 are what the operator built when it read v1beta1:
// these tests convert v1beta1 Pipelines to v1, as the apiserver stores them, and compare the
// children with what the v1beta1 builders made of the same Pipelines.

// toV1 converts a v1beta1 Pipeline to v1 as the apiserver stores it.
func toV1(t *testing.T, spoke *pipelinev1beta1.Pipeline) *pipelinev1.Pipeline {
	t.Helper()
	p := &pipelinev1.Pipeline{}
	if err := spoke.ConvertTo(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// stepEnvOf is the env of the container of step i's Deployment.
func stepEnvOf(t *testing.T, p *pipelinev1.Pipeline, i int) []corev1.EnvVar {
	t.Helper()
	return typedDeployment(t, p, i).Spec.Template.Spec.Containers[0].Env
}

// injected are the variables the operator sets in step 1 of a two-step Pipeline named envs in
// namespace ns1, whose steps are detect and step-2 (port 8081), model m1 under /data.
var injected = []corev1.EnvVar{
	{Name: pipelinev1.EnvModelName, Value: "m1"},
	{Name: pipelinev1.EnvModelPath, Value: "/data/m1"},
	{Name: pipelinev1.EnvPipelineName, Value: "envs"},
	{Name: pipelinev1.EnvStepName, Value: "detect"},
	{Name: pipelinev1.EnvStepIndex, Value: "1"},
	{Name: pipelinev1.EnvNextStepURL, Value: "http://envs-step-2.ns1.svc.cluster.local.:8081"},
}

func TestStepEnvOfAPipelineMadeInV1beta1(t *testing.T) {
	secret := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}
	spoke := &pipelinev1beta1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "envs", Namespace: "ns1"},
		Spec: pipelinev1beta1.PipelineSpec{
			Steps: []pipelinev1beta1.Step{{
				Name: "detect", Image: "img:1", Model: "m1",
				Args: map[string]pipelinev1beta1.ArgValue{"zeta": "z", "alpha": "a", "listenPort": "7000", "empty": ""},
				Env: []corev1.EnvVar{{Name: "EXTRA", Value: "1"}, {Name: pipelinev1.EnvModelName, Value: "override"},
					{Name: "FROMSECRET", ValueFrom: secret}},
			}, {
				Image: "img:2", Model: "m2", Port: ptr.To[int32](8081),
			}},
			ModelStorage: pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeNFS,
				CSIParameter: map[string]string{"server": "nfs.local", "share": "/models"}, MountPath: "/data"},
		},
	}
	p := toV1(t, spoke)

	// As v1beta1 made it: the args sorted by name, the variables the operator sets, then env.
	want := append(append([]corev1.EnvVar{
		{Name: "alpha", Value: "a"},
		{Name: "empty"},
		{Name: "listenPort", Value: "7000"},
		{Name: "zeta", Value: "z"},
	}, injected...),
		corev1.EnvVar{Name: "EXTRA", Value: "1"},
		corev1.EnvVar{Name: pipelinev1.EnvModelName, Value: "override"},
		corev1.EnvVar{Name: "FROMSECRET", ValueFrom: secret},
	)
	if diff := cmp.Diff(want, stepEnvOf(t, p, 0)); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if got := typedDeployment(t, p, 0).Spec.Template.Spec.Containers[0].Ports[0].ContainerPort; got != 7000 {
		t.Errorf("container port %d, want 7000 (args.listenPort)", got)
	}
	// The apply configuration, too, is the one v1beta1 sent: an arg's empty value is written.
	data, err := json.Marshal(StepDeployment(p, 0, "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `{"name":"empty","value":""}`) {
		t.Errorf("the empty arg is not written with its value: %s", data)
	}
	// A step that had no args has the variables the operator sets first.
	if env := stepEnvOf(t, p, 1); len(env) != len(injected) || env[0].Name != pipelinev1.EnvModelName {
		t.Errorf("env of step 2: %v", env)
	}
}

func TestStepEnvOfAPipelineMadeInV1(t *testing.T) {
	p := &pipelinev1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "envs", Namespace: "ns1"},
		Spec: pipelinev1.PipelineSpec{
			Steps: []pipelinev1.Step{{
				Name: "detect", Image: "img:1", Model: "m1",
				Env: []corev1.EnvVar{{Name: "zeta", Value: "z"}, {Name: "alpha", Value: "a"}},
			}, {
				Name: "step-2", Image: "img:2", Model: "m2", Port: ptr.To[int32](8081),
			}},
			ModelStorage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS,
				NFS: &pipelinev1.NFSStorage{Server: "nfs.local", Path: "/models"}, MountPath: "/data"},
		},
	}
	// Without conversion data: the variables the operator sets, then env in its order.
	want := append(append([]corev1.EnvVar{}, injected...), corev1.EnvVar{Name: "zeta", Value: "z"}, corev1.EnvVar{Name: "alpha", Value: "a"})
	if diff := cmp.Diff(want, stepEnvOf(t, p, 0)); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}

	// The entries the conversion data names as v1beta1 args lead, in their env order.
	p.Annotations = map[string]string{pipelinev1.ConversionDataAnnotation: `{"steps":{"0":{"args":["alpha","zeta"]}}}`}
	want = append([]corev1.EnvVar{{Name: "zeta", Value: "z"}, {Name: "alpha", Value: "a"}}, injected...)
	if diff := cmp.Diff(want, stepEnvOf(t, p, 0)); diff != "" {
		t.Errorf("env with conversion data (-want +got):\n%s", diff)
	}
}

// The names of the storage of a Pipeline made in v1beta1 are those the operator gave it when it
// read v1beta1, also for storage that v1 says otherwise (a csi driver v1beta1 left to its
// default, csiParameter entries and names the type does not read): new names would replace the
// claim.
func TestStorageNamesOfPipelinesMadeInV1beta1(t *testing.T) {
	tests := []struct {
		desc     string
		pipeline string
		storage  pipelinev1beta1.ModelStorage
		// The names the operator gave the storage when it read v1beta1.
		claim, legacyVolume, volume string
	}{{
		desc: "nfs", pipeline: "seed",
		storage: pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeNFS, CSIParameter: map[string]string{"server": "192.168.20.235", "share": "/home/aiedge/csiTest"}},
		claim:   "seed-models-32b28d30", legacyVolume: "ns3-seed-32b28d30",
		volume: "ns3-seed-5b24b89b9d8463deb4d3b94f9950a0ef17d6d71f0c79be9a9fc1887733f36b17",
	}, {
		desc: "storageClass", pipeline: "sc-plain",
		storage: pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeStorageClass, StorageClassName: "fast"},
		claim:   "sc-plain-models-13f92e92", legacyVolume: "ns3-sc-plain-13f92e92",
		volume: "ns3-sc-plain-1f8bacb0d1791642c3e8c1940eac2cb93ea55d5697e26fa2ba975fcc11f6bc65",
	}, {
		desc: "type left out: nfs", pipeline: "notype",
		storage: pipelinev1beta1.ModelStorage{CSIParameter: map[string]string{"server": "s", "share": "/x"}},
		claim:   "notype-models-65069d37", legacyVolume: "ns3-notype-65069d37",
		volume: "ns3-notype-44ddb1c07810a2daa1d4f27001d73658eb4ebaf34055b9b1463b83edbef07cb5",
	}, {
		desc: "csi without a driver or attributes", pipeline: "csi-nothing",
		storage: pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeCSI},
		claim:   "csi-nothing-models-36ffb533", legacyVolume: "ns3-csi-nothing-36ffb533",
		volume: "ns3-csi-nothing-08d6fb599b47c8103180155905e6871bf7129dffb1dd0ab3e0ea4ccf7746f23c",
	}, {
		desc: "csi naming only its driver", pipeline: "csi-driver-only",
		storage: pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeCSI, CSIParameter: map[string]string{"driver": "nfs.csi.k8s.io"}},
		claim:   "csi-driver-only-models-3ed6dc9b", legacyVolume: "ns3-csi-driver-only-3ed6dc9b",
		volume: "ns3-csi-driver-only-7e203ca83d84f51aa8b674b82ec5dae95ead9aa7880f7211288ca7155f633693",
	}, {
		desc: "nfs with a csiParameter entry and a class it does not read", pipeline: "nfs-extra",
		storage: pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeNFS, StorageClassName: "stray",
			CSIParameter: map[string]string{"server": "s", "share": "/x", "extra": "y"}},
		claim: "nfs-extra-models-07ef95c8", legacyVolume: "ns3-nfs-extra-07ef95c8",
		volume: "ns3-nfs-extra-18279b8c77f16dcf009589774e4ece412493371b526e53f3a99cc0caa01c9ce0",
	}, {
		desc: "storageClass with a csiParameter it does not read", pipeline: "sc-stray",
		storage: pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeStorageClass, StorageClassName: "fast",
			CSIParameter: map[string]string{"server": "s"}},
		claim: "sc-stray-models-7fc8b4e9", legacyVolume: "ns3-sc-stray-7fc8b4e9",
		volume: "ns3-sc-stray-2d57968953899162064b076b942f8884591e621b10f2708cb494851898aeff52",
	}}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			spoke := &pipelinev1beta1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: tt.pipeline, Namespace: "ns3"},
				Spec: pipelinev1beta1.PipelineSpec{
					Steps:        []pipelinev1beta1.Step{{Image: "i", Model: "m"}},
					ModelStorage: tt.storage,
				}}
			p := toV1(t, spoke)
			if got := ClaimName(p); got != tt.claim {
				t.Errorf("claim %q, want %q", got, tt.claim)
			}
			if got := LegacyPVName(p); got != tt.legacyVolume {
				t.Errorf("earlier volume name %q, want %q", got, tt.legacyVolume)
			}
			if got := PVName(p); got != tt.volume {
				t.Errorf("volume %q, want %q", got, tt.volume)
			}
		})
	}
}

// Conversion data that no longer converts to the storage (the storage was changed in v1 since)
// names nothing: the storage is named by what it says now, as a Pipeline made in v1 is.
func TestStorageNamesAfterAChangeInV1(t *testing.T) {
	spoke := &pipelinev1beta1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "csi-nothing", Namespace: "ns3"},
		Spec: pipelinev1beta1.PipelineSpec{
			Steps:        []pipelinev1beta1.Step{{Image: "i", Model: "m"}},
			ModelStorage: pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeCSI},
		}}
	p := toV1(t, spoke)
	if _, ok := p.Annotations[pipelinev1.ConversionDataAnnotation]; !ok {
		t.Fatal("the conversion keeps no data of a csi storage without driver")
	}
	before := ClaimName(p)
	p.Spec.ModelStorage.CSI.VolumeAttributes = map[string]string{"share": "/models"}
	changed := ClaimName(p)
	if changed == before {
		t.Errorf("another volume keeps the claim %q", before)
	}
	madeInV1 := p.DeepCopy()
	madeInV1.Annotations = nil
	if ClaimName(madeInV1) != changed || PVName(madeInV1) != PVName(p) {
		t.Errorf("claim %q, volume %q; made in v1: %q, %q", changed, PVName(p), ClaimName(madeInV1), PVName(madeInV1))
	}
}
