package problem

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

func TestOnlyConflicts(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pipelines"}, "p", errors.New("changed"))
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "s", errors.New("no"))
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a conflict", conflict, true},
		{"a wrapped conflict", fmt.Errorf("update status: %w", conflict), true},
		{"conflicts joined", errors.Join(fmt.Errorf("add: %w", conflict), WithReason(pipelinev1.ReasonApplyFailed, conflict)), true},
		{"a conflict joined with another error", errors.Join(conflict, fmt.Errorf("step 1: %w", forbidden)), false},
		{"a wrapped join with another error", fmt.Errorf("step 1: %w", errors.Join(conflict, forbidden)), false},
		{"another error", forbidden, false},
		{"already exists", apierrors.NewAlreadyExists(schema.GroupResource{Resource: "services"}, "s"), false},
	}
	for _, tt := range tests {
		if got := OnlyConflicts(tt.err); got != tt.want {
			t.Errorf("%s: onlyConflicts = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestOnlyReason(t *testing.T) {
	refused := WithReason("Refused", errors.New("denied"))
	other := errors.New("timeout")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"marked", refused, true},
		{"wrapped", fmt.Errorf("step 1: %w", refused), true},
		{"joined, all marked", errors.Join(refused, fmt.Errorf("step 2: %w", refused)), true},
		{"joined with another", errors.Join(refused, other), false},
		{"another reason", WithReason("Other", other), false},
		{"unmarked", other, false},
		{"nil", nil, false},
	} {
		if got := OnlyReason(tc.err, "Refused"); got != tc.want {
			t.Errorf("%s: OnlyReason = %v, want %v", tc.name, got, tc.want)
		}
	}
}
