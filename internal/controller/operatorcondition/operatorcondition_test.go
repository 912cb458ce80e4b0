package operatorcondition

import (
	"context"
	"testing"

	apiv2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestNewOperatorCondition(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := apiv2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	oc := &apiv2.OperatorCondition{ObjectMeta: metav1.ObjectMeta{Namespace: "operators", Name: "pipeline-operator.v0.1.0"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(oc).Build()
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

	// Out of a Pod (no service-account namespace file), without POD_NAMESPACE or without OLM's
	// variable there is no condition: operator-lib's in-cluster lookup decides, and fails.
	for _, vars := range []map[string]string{
		{EnvOperatorConditionName: oc.Name},
		{EnvPodNamespace: oc.Namespace},
	} {
		if _, err := New(c, apiv2.ConditionType(apiv2.Upgradeable), env(vars)); err == nil {
			t.Errorf("%v: a condition without its name and namespace", vars)
		}
	}

	cond, err := New(c, apiv2.ConditionType(apiv2.Upgradeable), env(map[string]string{EnvOperatorConditionName: oc.Name, EnvPodNamespace: oc.Namespace}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cond.Get(ctx); err == nil {
		t.Error("Get of a condition never set succeeded")
	}
	if err := cond.Set(ctx, metav1.ConditionFalse, conditions.WithReason("R"), conditions.WithMessage("M")); err != nil {
		t.Fatal(err)
	}
	got, err := cond.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != apiv2.Upgradeable || got.Status != metav1.ConditionFalse || got.Reason != "R" || got.Message != "M" {
		t.Errorf("condition %+v", got)
	}
	stored := &apiv2.OperatorCondition{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(oc), stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Spec.Conditions) != 1 || stored.Spec.Conditions[0].Reason != "R" {
		t.Errorf("stored spec.conditions %+v: the operator writes its conditions into the spec, as operator-lib does", stored.Spec.Conditions)
	}
}
