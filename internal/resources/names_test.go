package resources

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestChildName(t *testing.T) {
	long := strings.Repeat("a", 63)
	tests := []struct {
		name  string
		parts []string
		want  string
	}{
		{"short names are joined", []string{"facedetection-pipeline", "step-1"}, "facedetection-pipeline-step-1"},
		{"exactly 63 characters stay as they are", []string{strings.Repeat("a", 56), "step-1"}, strings.Repeat("a", 56) + "-step-1"},
		{"64 characters are shortened", []string{strings.Repeat("a", 57), "step-1"}, ""},
		{"a 63-character pipeline with a long step name", []string{long, strings.Repeat("b", 40)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := childName(tt.parts...)
			if tt.want != "" && got != tt.want {
				t.Errorf("childName(%q) = %q, want %q", tt.parts, got, tt.want)
			}
			if len(got) > maxNameLength {
				t.Errorf("childName(%q) = %q has %d characters", tt.parts, got, len(got))
			}
			if errs := validation.IsDNS1035Label(got); len(errs) > 0 {
				t.Errorf("childName(%q) = %q is not a DNS label: %v", tt.parts, got, errs)
			}
			if childName(tt.parts...) != got {
				t.Errorf("childName(%q) is not deterministic", tt.parts)
			}
		})
	}
}

func TestChildNameKeepsLongNamesApart(t *testing.T) {
	prefix := strings.Repeat("p", 60)
	a, b := childName(prefix, "step-1"), childName(prefix, "step-2")
	if a == b {
		t.Fatalf("long names collapsed to %q", a)
	}
	if !strings.HasPrefix(a, prefix[:40]) {
		t.Errorf("shortened name %q lost its readable start", a)
	}
}

func TestStepNames(t *testing.T) {
	p := testenv.Sample(t, "default")
	p.Spec.Steps[1].Name = "recognise"
	if got := StepName(p, 0); got != "step-1" {
		t.Errorf("unnamed step 1 is %q, want step-1", got)
	}
	if got := StepObjectName(p, 1); got != "facedetection-pipeline-recognise" {
		t.Errorf("named step object is %q", got)
	}
}

func TestStorageNames(t *testing.T) {
	p := testenv.Sample(t, "default")
	other := p.DeepCopy()
	other.Namespace = "edge"

	if PVName(p) == PVName(other) {
		t.Errorf("PV names of pipelines in two namespaces collide: %q", PVName(p))
	}
	if !strings.HasPrefix(ClaimName(p), "facedetection-pipeline-models-") {
		t.Errorf("claim name %q does not say what it is", ClaimName(p))
	}
	before := PVName(p)
	p.Spec.ModelStorage.CSIParameter["share"] = "/elsewhere"
	if PVName(p) == before {
		t.Errorf("a different export kept the PV name %q", before)
	}
	p.Spec.ModelStorage.Type = pipelinev1beta1.StorageTypeExistingClaim
	p.Spec.ModelStorage.ClaimName = "my-models"
	if ClaimName(p) != "my-models" {
		t.Errorf("existingClaim mounts %q, want my-models", ClaimName(p))
	}

	p.Name = strings.Repeat("n", 63)
	p.Namespace = strings.Repeat("s", 63)
	for _, n := range []string{PVName(p), ClaimName(p), StepObjectName(p, 0)} {
		if len(n) > maxNameLength {
			t.Errorf("name %q has %d characters", n, len(n))
		}
	}
}
