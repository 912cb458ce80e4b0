package apply

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// modelServerDeployment is what the operator applies for the sample's first step with every
// model server field, podMetadata among them, and the Deployment as the apiserver returns it
// after the operator's create.
func modelServerDeployment(t *testing.T) (*appliedObject, *appsv1.Deployment) {
	t.Helper()
	p := testenv.Sample(t, "default")
	p.Spec.Steps[0] = testenv.ModelServerStep(p.Spec.Steps[0])
	a := must(newAppliedObject(resources.StepDeployment(p, 0, "", "", "")))
	return a, created(t, a).(*appsv1.Deployment)
}

// The labels and annotations of a step's podMetadata are the operator's own once it applied
// them: the cache keeps them, so a converged Pipeline costs no write, and transforming again
// changes nothing.
func TestTransformsKeepThePodMetadataTheOperatorApplied(t *testing.T) {
	a, d := modelServerDeployment(t)
	cached, err := transformOf(t, d)(d)
	if err != nil {
		t.Fatal(err)
	}
	c := cached.(*appsv1.Deployment)
	if c.Spec.Template.Labels["team"] != "vision" || c.Spec.Template.Annotations["prometheus.io/scrape"] != "true" {
		t.Fatalf("the cache dropped the step's pod labels %v or annotations %v", c.Spec.Template.Labels, c.Spec.Template.Annotations)
	}
	if ok, err := a.upToDate(c); err != nil || !ok {
		t.Errorf("the cached child does not match what was applied (up to date %v, %v)", ok, err)
	}
	again, err := transformOf(t, c)(c.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, cached) {
		t.Errorf("transformed twice\n%+v\nonce\n%+v", again, cached)
	}
}

// A label or annotation of the step's someone else took over (an update that changed it moves
// the field to its manager) or removed is not the operator's any more: the cache drops it, and
// the child is out of date until the operator applies it again.
func TestTransformsDropThePodMetadataOthersChanged(t *testing.T) {
	a, d := modelServerDeployment(t)
	// kubectl edit changed the label team and the annotation prometheus.io/port: the operator's
	// entry no longer owns them.
	var fields map[string]any
	if err := json.Unmarshal(d.ManagedFields[0].FieldsV1.GetRawBytes(), &fields); err != nil {
		t.Fatal(err)
	}
	metadata := fields["f:spec"].(map[string]any)["f:template"].(map[string]any)["f:metadata"].(map[string]any)
	delete(metadata["f:labels"].(map[string]any), "f:team")
	delete(metadata["f:annotations"].(map[string]any), "f:prometheus.io/port")
	ours, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	d.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(string(ours))},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(
			`{"f:spec":{"f:template":{"f:metadata":{"f:labels":{"f:team":{}},"f:annotations":{"f:prometheus.io/port":{}}}}}}`)},
	}
	d.Spec.Template.Labels["team"] = "audio"
	d.Spec.Template.Annotations["prometheus.io/port"] = "9090"
	cached, err := transformOf(t, d)(d)
	if err != nil {
		t.Fatal(err)
	}
	c := cached.(*appsv1.Deployment)
	if _, ok := c.Spec.Template.Labels["team"]; ok {
		t.Errorf("the cache keeps the label someone else changed: %v", c.Spec.Template.Labels)
	}
	if _, ok := c.Spec.Template.Annotations["prometheus.io/port"]; ok {
		t.Errorf("the cache keeps the annotation someone else changed: %v", c.Spec.Template.Annotations)
	}
	if c.Spec.Template.Labels["example.com/tier"] != "gpu" || c.Spec.Template.Annotations["prometheus.io/scrape"] != "true" {
		t.Errorf("the cache dropped what the operator still owns: %v, %v", c.Spec.Template.Labels, c.Spec.Template.Annotations)
	}
	if ok, _ := a.upToDate(c); ok {
		t.Error("a pod label someone else changed went unnoticed through the cache transform")
	}
}

// Whoever writes under the operator's field manager cannot make the cache keep more than a
// step's podMetadata holds: a pod template with more entries of that manager keeps only the
// operator's own labels, and the next apply removes the others.
func TestTransformsKeepAtMostAPodMetadataOfEntries(t *testing.T) {
	_, d := modelServerDeployment(t)
	var owned []string
	for i := range maxPodMetadataEntries + 1 {
		k := fmt.Sprintf("tenant.example.com/l%d", i)
		d.Spec.Template.Labels[k] = "x"
		owned = append(owned, fmt.Sprintf(`"f:%s":{}`, k))
	}
	d.ManagedFields = append(d.ManagedFields, metav1.ManagedFieldsEntry{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:template":{"f:metadata":{"f:labels":{` + strings.Join(owned, ",") + `}}}}}`)})
	cached, err := transformOf(t, d)(d)
	if err != nil {
		t.Fatal(err)
	}
	for k := range cached.(client.Object).(*appsv1.Deployment).Spec.Template.Labels {
		if !resources.IsOperatorLabel(k) {
			t.Errorf("the cache keeps the pod label %s of a template with more than %d labels of the operator's field manager", k, maxPodMetadataEntries)
		}
	}
}
