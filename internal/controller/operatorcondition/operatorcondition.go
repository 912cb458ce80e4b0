package operatorcondition

import (
	"context"
	"fmt"

	apiv2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Environment variables that locate the operator's OperatorCondition.
const (
	// EnvOperatorConditionName is set by OLM on the operator's Deployment: the name of the
	// OperatorCondition (the name of the ClusterServiceVersion).
	EnvOperatorConditionName = "OPERATOR_CONDITION_NAME"
	// EnvPodNamespace is the manager's namespace, set by the Deployment from the downward API.
	EnvPodNamespace = "POD_NAMESPACE"
)

// New returns the condType condition of the operator's OperatorCondition, or
// an error when the operator does not run under OLM (getenv(EnvOperatorConditionName) is empty).
//
// The OperatorCondition lives in the operator's namespace. operator-lib's InClusterFactory reads
// that namespace from the service-account file mounted into a Pod, so a manager run outside a
// Pod would have no condition at all. The Deployment sets EnvPodNamespace to the same namespace;
// when it is set it is used, with the condition read and written exactly as operator-lib does.
// Without it, operator-lib's InClusterFactory decides.
func New(c client.Client, condType apiv2.ConditionType, getenv func(string) string) (conditions.Condition, error) {
	name, namespace := getenv(EnvOperatorConditionName), getenv(EnvPodNamespace)
	if name == "" || namespace == "" {
		return conditions.InClusterFactory{Client: c}.NewCondition(condType)
	}
	return &operatorCondition{client: c, key: types.NamespacedName{Namespace: namespace, Name: name}, condType: condType}, nil
}

// operatorCondition is one condition type of an OperatorCondition's spec, the part the operator
// owns (OLM copies it into the status), read and written as operator-lib's conditions do.
type operatorCondition struct {
	client   client.Client
	key      types.NamespacedName
	condType apiv2.ConditionType
}

var _ conditions.Condition = &operatorCondition{}

// Get returns the condition, or an error when the OperatorCondition or the condition is missing.
func (o *operatorCondition) Get(ctx context.Context) (*metav1.Condition, error) {
	oc := &apiv2.OperatorCondition{}
	if err := o.client.Get(ctx, o.key, oc); err != nil {
		return nil, err
	}
	c := meta.FindStatusCondition(oc.Spec.Conditions, string(o.condType))
	if c == nil {
		return nil, fmt.Errorf("conditionType %v not found", o.condType)
	}
	return c, nil
}

// Set sets the condition, adding it when it is missing.
func (o *operatorCondition) Set(ctx context.Context, status metav1.ConditionStatus, opts ...conditions.Option) error {
	oc := &apiv2.OperatorCondition{}
	if err := o.client.Get(ctx, o.key, oc); err != nil {
		return err
	}
	c := metav1.Condition{Type: string(o.condType), Status: status}
	for _, opt := range opts {
		opt(&c)
	}
	meta.SetStatusCondition(&oc.Spec.Conditions, c)
	return o.client.Update(ctx, oc)
}
