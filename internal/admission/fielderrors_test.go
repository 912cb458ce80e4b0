package admission

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// A Pipeline with hundreds of faults is refused with the first MaxFieldErrors of them and one
// that counts the rest, so that building the refusal costs what MaxFieldErrors costs.
func TestValidateListsTheFirstFieldErrors(t *testing.T) {
	p := sampleV1(t)
	step := p.Spec.Steps[0]
	p.Spec.Steps = nil
	for i := range 64 {
		s := *step.DeepCopy()
		s.Name = fmt.Sprintf("step-%d", i)
		for j := range 8 {
			s.Env = append(s.Env, corev1.EnvVar{Name: fmt.Sprintf("A=%d", j), Value: "1"})
		}
		p.Spec.Steps = append(p.Spec.Steps, s)
	}
	if n := len(ValidatePipeline(p)); n < 512 {
		t.Fatalf("%d field errors, want at least 512 for this test", n)
	}
	_, err := (&Validator{}).ValidateCreate(requestIn("v1"), p)
	var status *apierrors.StatusError
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		t.Fatalf("error %v, want Invalid", err)
	}
	causes := status.ErrStatus.Details.Causes
	if len(causes) != MaxFieldErrors+1 {
		t.Fatalf("%d causes, want %d and one that counts the rest", len(causes), MaxFieldErrors+1)
	}
	if last := causes[MaxFieldErrors]; last.Field != "spec" || !strings.Contains(last.Message, "more errors not listed") {
		t.Errorf("last cause %+v, want the count of the others", last)
	}
	if first := causes[0]; first.Field != "spec.steps[0].env[A=0].name" {
		t.Errorf("first cause on %q, want the first fault", first.Field)
	}
}
