package v1beta1

import (
	"context"
	"strings"
	"testing"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

// A Pipeline stored before a check existed (here: an image with a trailing space) can still
// get labels, annotations and finalizers; a change of its spec must then pass every check.
func TestValidateUpdateChecksOnlyChangedSpecs(t *testing.T) {
	stored, err := samples.Pipeline("default")
	if err != nil {
		t.Fatal(err)
	}
	stored.Spec.Steps[0].Image = "nginx:latest "
	v := &Validator{}
	ctx := context.Background()

	labelled := stored.DeepCopy()
	labelled.Labels = map[string]string{"team": "vision"}
	labelled.Annotations = map[string]string{pipelinev1beta1.PausedAnnotation: "true"}
	if _, err := v.ValidateUpdate(ctx, stored, labelled); err != nil {
		t.Fatalf("a metadata-only update was refused: %v", err)
	}

	edited := labelled.DeepCopy()
	edited.Spec.Steps[1].Model = "facedetection-3"
	_, err = v.ValidateUpdate(ctx, stored, edited)
	if err == nil || !strings.Contains(err.Error(), "spec.steps[0].image") {
		t.Fatalf("a spec update kept an invalid image: %v", err)
	}
}

func TestNFSShareMayEndInASlash(t *testing.T) {
	p, err := samples.Pipeline("default")
	if err != nil {
		t.Fatal(err)
	}
	for share, ok := range map[string]bool{"/exports/models/": true, "/": true, "/exports/../models": false, "/exports//models": false} {
		p.Spec.ModelStorage.CSIParameter["share"] = share
		if errs := ValidatePipeline(p); (len(errs) == 0) != ok {
			t.Errorf("share %q: errors %v, want accepted %t", share, errs, ok)
		}
	}
}
