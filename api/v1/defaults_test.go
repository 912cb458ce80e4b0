package v1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func int32p(v int32) *int32 { return &v }

func TestDefaultAutoscaledStep(t *testing.T) {
	tests := []struct {
		name         string
		step         Step
		wantReplicas *int32
		want         *StepAutoscaling
	}{{
		name:         "no autoscaling: replicas 1",
		step:         Step{},
		wantReplicas: int32p(1),
	}, {
		name: "autoscaling: no replicas, minReplicas 1, 80% CPU",
		step: Step{Autoscaling: &StepAutoscaling{MaxReplicas: 4}},
		want: &StepAutoscaling{MinReplicas: int32p(1), MaxReplicas: 4, TargetCPUUtilizationPercentage: int32p(80)},
	}, {
		name: "the replicas 1 stored before autoscaling goes",
		step: Step{Replicas: int32p(1), Autoscaling: &StepAutoscaling{MinReplicas: int32p(2), MaxReplicas: 4}},
		want: &StepAutoscaling{MinReplicas: int32p(2), MaxReplicas: 4, TargetCPUUtilizationPercentage: int32p(80)},
	}, {
		name:         "other replicas stay, for validation to refuse",
		step:         Step{Replicas: int32p(3), Autoscaling: &StepAutoscaling{MaxReplicas: 4}},
		wantReplicas: int32p(3),
		want:         &StepAutoscaling{MinReplicas: int32p(1), MaxReplicas: 4, TargetCPUUtilizationPercentage: int32p(80)},
	}, {
		name: "a memory target alone gets no CPU target",
		step: Step{Autoscaling: &StepAutoscaling{MaxReplicas: 4, TargetMemoryUtilizationPercentage: int32p(70)}},
		want: &StepAutoscaling{MinReplicas: int32p(1), MaxReplicas: 4, TargetMemoryUtilizationPercentage: int32p(70)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Pipeline{Spec: PipelineSpec{Steps: []Step{tt.step}}}
			p.Default()
			got := p.Spec.Steps[0]
			if diff := cmp.Diff(tt.wantReplicas, got.Replicas); diff != "" {
				t.Errorf("replicas (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got.Autoscaling); diff != "" {
				t.Errorf("autoscaling (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultNamesUnnamedSteps(t *testing.T) {
	p := &Pipeline{Spec: PipelineSpec{Steps: []Step{{}, {Name: "detect"}, {}}}}
	p.Default()
	var got []string
	for _, s := range p.Spec.Steps {
		got = append(got, s.Name)
	}
	if diff := cmp.Diff([]string{"step-1", "detect", "step-3"}, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}

	// A step that another step already took the default name of stays unnamed: validation
	// then names the conflict instead of finding two steps of one name.
	p = &Pipeline{Spec: PipelineSpec{Steps: []Step{{}, {Name: "step-1"}}}}
	p.Default()
	if p.Spec.Steps[0].Name != "" {
		t.Errorf("the first step is named %q, want it left unnamed: step-1 is the second step's", p.Spec.Steps[0].Name)
	}
}

func TestDefaultStorageOfEachMember(t *testing.T) {
	p := &Pipeline{Spec: PipelineSpec{ModelStorage: ModelStorage{Type: ModelStorageTypeNFS, NFS: &NFSStorage{Server: "s", Path: "/p"}}}}
	p.Default()
	m := p.Spec.ModelStorage
	if m.MountPath != DefaultMountPath || m.NFS.Capacity == nil || m.NFS.Capacity.String() != DefaultCapacity ||
		!cmp.Equal(m.NFS.AccessModes, []corev1.PersistentVolumeAccessMode{DefaultAccessMode}) {
		t.Errorf("defaulted storage %+v, nfs %+v", m, *m.NFS)
	}
	claim := &Pipeline{Spec: PipelineSpec{ModelStorage: ModelStorage{Type: ModelStorageTypeExistingClaim, ExistingClaim: &ExistingClaimStorage{Name: "c"}}}}
	claim.Default()
	if claim.Spec.ModelStorage.ExistingClaim.Name != "c" || claim.Spec.ModelStorage.MountPath != DefaultMountPath {
		t.Errorf("defaulted existing claim %+v", claim.Spec.ModelStorage)
	}
}

func TestDefaultRouter(t *testing.T) {
	p := &Pipeline{Spec: PipelineSpec{DataPath: &DataPath{Mode: DataPathModeRouter}}}
	p.Default()
	if r := p.Spec.RouterSettings(); r == nil || r.Replicas == nil || *r.Replicas != DefaultRouterReplicas {
		t.Errorf("router settings %+v, want replicas %d", r, DefaultRouterReplicas)
	}
	chain := &Pipeline{Spec: PipelineSpec{DataPath: &DataPath{Mode: DataPathModeChain}}}
	chain.Default()
	if chain.Spec.DataPath.Router != nil {
		t.Errorf("a Chain data path got router settings %+v", chain.Spec.DataPath.Router)
	}
}

func TestLeadingEnv(t *testing.T) {
	p := &Pipeline{}
	if got := p.LeadingEnv(0); got != nil {
		t.Errorf("without conversion data: %v, want none", got)
	}
	p.Annotations = map[string]string{ConversionDataAnnotation: `{"steps":{"1":{"args":["a","b"]}}}`}
	if diff := cmp.Diff([]string{"a", "b"}, p.LeadingEnv(1)); diff != "" {
		t.Errorf("step 1 (-want +got):\n%s", diff)
	}
	if got := p.LeadingEnv(0); got != nil {
		t.Errorf("step 0: %v, want none", got)
	}
	p.Annotations[ConversionDataAnnotation] = "not json"
	if got := p.LeadingEnv(1); got != nil {
		t.Errorf("unreadable conversion data: %v, want none", got)
	}
}
