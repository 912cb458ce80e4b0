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
)

// The children of a Pipeline whose conversion data (ConversionDataAnnotation) or recorded
// storage identity (StorageIdentityAnnotation) say how an earlier API version made them are
// made as they were then.

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

// envsPipeline is the two-step Pipeline of injected with env in step 1.
func envsPipeline(env []corev1.EnvVar, port *int32) *pipelinev1.Pipeline {
	return &pipelinev1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "envs", Namespace: "ns1"},
		Spec: pipelinev1.PipelineSpec{
			Steps: []pipelinev1.Step{
				{Name: "detect", Image: "img:1", Model: "m1", Env: env, Port: port},
				{Name: "step-2", Image: "img:2", Model: "m2", Port: ptr.To[int32](8081)},
			},
			ModelStorage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS,
				NFS: &pipelinev1.NFSStorage{Server: "nfs.local", Path: "/models"}, MountPath: "/data"},
		},
	}
}

// A step whose conversion data names env entries that were the earlier version's args has them
// first, sorted as that version sorted its args, then the variables the operator sets, then its
// other entries.
func TestStepEnvWithLeadingEntries(t *testing.T) {
	secret := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}
	env := []corev1.EnvVar{{Name: "alpha", Value: "a"}, {Name: "empty"}, {Name: "listenPort", Value: "7000"}, {Name: "zeta", Value: "z"},
		{Name: "EXTRA", Value: "1"}, {Name: pipelinev1.EnvModelName, Value: "override"}, {Name: "FROMSECRET", ValueFrom: secret}}
	p := envsPipeline(env, ptr.To[int32](7000))
	// As the conversion keeps it of a step made with the args alpha, empty, listenPort and zeta.
	p.Annotations = map[string]string{pipelinev1.ConversionDataAnnotation: `{"steps":{"0":{"args":["alpha","empty","listenPort","zeta"],` +
		`"portUnset":true},"1":{"unnamed":true}}}`}

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
		t.Errorf("container port %d, want 7000", got)
	}
	// The apply configuration writes a leading entry's empty value, as the earlier version did.
	data, err := json.Marshal(StepDeployment(p, 0, "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `{"name":"empty","value":""}`) {
		t.Errorf("the empty leading entry is not written with its value: %s", data)
	}
	// A step without leading entries has the variables the operator sets first.
	if env := stepEnvOf(t, p, 1); len(env) != len(injected) || env[0].Name != pipelinev1.EnvModelName {
		t.Errorf("env of step 2: %v", env)
	}
}

func TestStepEnvWithoutConversionData(t *testing.T) {
	p := envsPipeline([]corev1.EnvVar{{Name: "zeta", Value: "z"}, {Name: "alpha", Value: "a"}}, nil)
	// Without conversion data: the variables the operator sets, then env in its order.
	want := append(append([]corev1.EnvVar{}, injected...), corev1.EnvVar{Name: "zeta", Value: "z"}, corev1.EnvVar{Name: "alpha", Value: "a"})
	if diff := cmp.Diff(want, stepEnvOf(t, p, 0)); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}

	// The entries the conversion data names lead, in their env order.
	p.Annotations = map[string]string{pipelinev1.ConversionDataAnnotation: `{"steps":{"0":{"args":["alpha","zeta"]}}}`}
	want = append([]corev1.EnvVar{{Name: "zeta", Value: "z"}, {Name: "alpha", Value: "a"}}, injected...)
	if diff := cmp.Diff(want, stepEnvOf(t, p, 0)); diff != "" {
		t.Errorf("env with conversion data (-want +got):\n%s", diff)
	}
}

// The names of the storage hash the recipe's identity of the spec, the same since the first
// release, or the identity recorded for the spec's storage: the names the operator gave storage
// that the earlier API version said in a form the recipe does not see.
func TestStorageNamesByIdentity(t *testing.T) {
	tests := []struct {
		desc     string
		pipeline string
		storage  pipelinev1.ModelStorage
		// recorded is the value of StorageIdentityAnnotation; empty: none.
		recorded                    string
		claim, legacyVolume, volume string
	}{{
		desc: "nfs, the seed's export", pipeline: "seed",
		storage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS, NFS: &pipelinev1.NFSStorage{Server: "192.168.20.235", Path: "/home/aiedge/csiTest"}},
		claim:   "seed-models-32b28d30", legacyVolume: "ns3-seed-32b28d30",
		volume: "ns3-seed-5b24b89b9d8463deb4d3b94f9950a0ef17d6d71f0c79be9a9fc1887733f36b17",
	}, {
		desc: "csi, by the recipe", pipeline: "csi-nothing",
		storage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI, CSI: &pipelinev1.CSIStorage{Driver: pipelinev1.DefaultCSIDriver}},
		claim:   "csi-nothing-models-8773a5c9", legacyVolume: "ns3-csi-nothing-8773a5c9",
		volume: "ns3-csi-nothing-7a43429af1ceee4863196b1b4a2f9dc591248a3463521e685fa13ac914d9b5c5",
	}, {
		desc: "csi, recorded without its driver", pipeline: "csi-nothing",
		storage:  pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI, CSI: &pipelinev1.CSIStorage{Driver: pipelinev1.DefaultCSIDriver}},
		recorded: `{"parts":["csi","","1Gi","ReadOnlyMany"],"storage":"383553a7109bff6942a6df6312c79018636796094ab3dba5afd7078ce9ce8c62"}`,
		claim:    "csi-nothing-models-36ffb533", legacyVolume: "ns3-csi-nothing-36ffb533",
		volume: "ns3-csi-nothing-08d6fb599b47c8103180155905e6871bf7129dffb1dd0ab3e0ea4ccf7746f23c",
	}, {
		desc: "csi, recorded for other storage: the recipe", pipeline: "csi-nothing",
		storage:  pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI, CSI: &pipelinev1.CSIStorage{Driver: pipelinev1.DefaultCSIDriver}},
		recorded: `{"parts":["csi","","1Gi","ReadOnlyMany"],"storage":"0000000000000000000000000000000000000000000000000000000000000000"}`,
		claim:    "csi-nothing-models-8773a5c9", legacyVolume: "ns3-csi-nothing-8773a5c9",
		volume: "ns3-csi-nothing-7a43429af1ceee4863196b1b4a2f9dc591248a3463521e685fa13ac914d9b5c5",
	}, {
		desc: "nfs, recorded with a parameter and a class it does not read", pipeline: "nfs-extra",
		storage:  pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS, NFS: &pipelinev1.NFSStorage{Server: "s", Path: "/x"}},
		recorded: `{"parts":["nfs","stray","1Gi","ReadOnlyMany","extra=y","server=s","share=/x"],"storage":"10598151b04290d0b4a3ea450aed72c130f9eda0141fb5596f9a7eb74bddbae8"}`,
		claim:    "nfs-extra-models-07ef95c8", legacyVolume: "ns3-nfs-extra-07ef95c8",
		volume: "ns3-nfs-extra-18279b8c77f16dcf009589774e4ece412493371b526e53f3a99cc0caa01c9ce0",
	}, {
		desc: "storageClass, by the recipe", pipeline: "sc-stray",
		storage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass, StorageClass: &pipelinev1.StorageClassStorage{Name: "fast"}},
		claim:   "sc-stray-models-c5c224b5", legacyVolume: "ns3-sc-stray-c5c224b5",
		volume: "ns3-sc-stray-ac2a2851cc9b3fbf3d8edf395e3d91a43a44a8ed2de2735f492391cd9463dadb",
	}, {
		desc: "storageClass, recorded with a parameter it does not read", pipeline: "sc-stray",
		storage:  pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass, StorageClass: &pipelinev1.StorageClassStorage{Name: "fast"}},
		recorded: `{"parts":["storageClass","fast","1Gi","ReadOnlyMany","server=s"],"storage":"526cd41156889f5b82911ada0a0dee25bf004f0221e1a26163efd1bbc362865d"}`,
		claim:    "sc-stray-models-7fc8b4e9", legacyVolume: "ns3-sc-stray-7fc8b4e9",
		volume: "ns3-sc-stray-2d57968953899162064b076b942f8884591e621b10f2708cb494851898aeff52",
	}}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: tt.pipeline, Namespace: "ns3"},
				Spec: pipelinev1.PipelineSpec{Steps: []pipelinev1.Step{{Name: "step-1", Image: "i", Model: "m"}}, ModelStorage: tt.storage}}
			if tt.recorded != "" {
				p.Annotations = map[string]string{pipelinev1.StorageIdentityAnnotation: tt.recorded}
			}
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
