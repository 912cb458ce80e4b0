package resources

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
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
	p.Spec.ModelStorage.NFS.Path = "/elsewhere"
	if PVName(p) == before {
		t.Errorf("a different export kept the PV name %q", before)
	}
	p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim,
		ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: "my-models"}}
	if ClaimName(p) != "my-models" {
		t.Errorf("existingClaim mounts %q, want my-models", ClaimName(p))
	}

	p.Name = strings.Repeat("n", 63)
	p.Namespace = strings.Repeat("s", 63)
	for _, n := range []string{ClaimName(p), StepObjectName(p, 0)} {
		if len(n) > maxNameLength {
			t.Errorf("name %q has %d characters", n, len(n))
		}
	}
}

// oldPVName is the name an earlier version gave the model PersistentVolume: namespace, name and
// the 8-digit storage key joined, cut to a DNS label.
func oldPVName(p *pipelinev1.Pipeline) string {
	return childName(p.Namespace, p.Name, storageKey(p))
}

func TestPVName(t *testing.T) {
	pipeline := func(ns, name string, edits ...func(*pipelinev1.Pipeline)) *pipelinev1.Pipeline {
		p := testenv.Sample(t, ns)
		p.Name = name
		for _, e := range edits {
			e(p)
		}
		return p
	}
	share := func(s string) func(*pipelinev1.Pipeline) {
		return func(p *pipelinev1.Pipeline) { p.Spec.ModelStorage.NFS.Path = s }
	}
	// attributes makes the storage csi, with the sample's server and the volume attributes kv.
	attributes := func(kv ...string) func(*pipelinev1.Pipeline) {
		return func(p *pipelinev1.Pipeline) {
			attrs := map[string]string{"server": p.Spec.ModelStorage.NFS.Server}
			for i := 0; i+1 < len(kv); i += 2 {
				attrs[kv[i]] = kv[i+1]
			}
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
				CSI: &pipelinev1.CSIStorage{Driver: pipelinev1.DefaultCSIDriver, VolumeAttributes: attrs}}
		}
	}
	tests := []struct {
		name string
		a, b *pipelinev1.Pipeline
		// oldCollided marks inputs to which the earlier names gave the same volume name.
		oldCollided bool
	}{
		{
			// Found by trying names: the joined names agree in their first 54 characters, and
			// the 32-bit hashes of the whole joined names are equal.
			name:        "two namespaces whose earlier names collided",
			a:           pipeline("team-a", "facedetection-pipeline-for-the-edge-sites-of-the-lab-dda0"),
			b:           pipeline("team", "a-facedetection-pipeline-for-the-edge-sites-of-the-lab-259c"),
			oldCollided: true,
		},
		{name: "the same joined start in two namespaces", a: pipeline("a-b", "c"), b: pipeline("a", "b-c")},
		{name: "the same Pipeline in two namespaces", a: pipeline("default", "p"), b: pipeline("edge", "p")},
		{name: "two storage specs of one Pipeline", a: pipeline("default", "p"), b: pipeline("default", "p", share("/elsewhere"))},
		{
			// The earlier hash separated the parts with a NUL character, which a value may hold.
			name:        "a volume attribute value that spells the next entry",
			a:           pipeline("default", "p", attributes("share", "/m", "tail", "x")),
			b:           pipeline("default", "p", attributes("share", "/m\x00tail=x")),
			oldCollided: true,
		},
		{name: "longest namespace and name", a: pipeline(strings.Repeat("s", 63), strings.Repeat("n", 63)),
			b: pipeline(strings.Repeat("s", 63), strings.Repeat("n", 62)+"m")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := oldPVName(tt.a) == oldPVName(tt.b); got != tt.oldCollided {
				t.Fatalf("the earlier names collide: %v, want %v (%q, %q)", got, tt.oldCollided, oldPVName(tt.a), oldPVName(tt.b))
			}
			a, b := PVName(tt.a), PVName(tt.b)
			if a == b {
				t.Errorf("%s/%s and %s/%s share the volume name %q", tt.a.Namespace, tt.a.Name, tt.b.Namespace, tt.b.Name, a)
			}
			for _, p := range []*pipelinev1.Pipeline{tt.a, tt.b} {
				n := PVName(p)
				if len(n) > maxVolumePrefixLength+1+64 || len(n) > validation.DNS1123SubdomainMaxLength {
					t.Errorf("%q has %d characters", n, len(n))
				}
				if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
					t.Errorf("%q is not a DNS subdomain: %v", n, errs)
				}
				prefix, sum, _ := strings.Cut(n[len(n)-65:], "-")
				if prefix != "" || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
					t.Errorf("%q does not end in a SHA-256", n)
				}
				if want := p.Namespace + "-" + p.Name; !strings.HasPrefix(want, strings.TrimSuffix(n, "-"+sum)) {
					t.Errorf("%q does not start with %q", n, want)
				}
				if PVName(p) != n {
					t.Errorf("PVName(%s/%s) is not deterministic", p.Namespace, p.Name)
				}
			}
		})
	}
}
