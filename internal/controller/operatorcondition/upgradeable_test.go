package operatorcondition

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// pipelineWith is a Pipeline of generation 2 whose Progressing condition, if status is not
// empty, has the given status and generation.
func pipelineWith(name string, status metav1.ConditionStatus, gen int64, edit ...func(*pipelinev1.Pipeline)) pipelinev1.Pipeline {
	p := pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 2}}
	if status != "" {
		p.Status.Conditions = []metav1.Condition{{Type: pipelinev1.ConditionProgressing, Status: status, ObservedGeneration: gen}}
	}
	for _, e := range edit {
		e(&p)
	}
	return p
}

func TestUpgradeable(t *testing.T) {
	deleting := func(p *pipelinev1.Pipeline) { now := metav1.Now(); p.DeletionTimestamp = &now }
	paused := func(p *pipelinev1.Pipeline) {
		p.Annotations = map[string]string{pipelinev1.PausedAnnotation: "true"}
	}
	tests := []struct {
		name      string
		pipelines []pipelinev1.Pipeline
		status    metav1.ConditionStatus
		message   string
	}{
		{name: "no Pipeline", status: metav1.ConditionTrue, message: "No Pipeline is rolling out"},
		{name: "every Pipeline rolled out", status: metav1.ConditionTrue, pipelines: []pipelinev1.Pipeline{
			pipelineWith("a", metav1.ConditionFalse, 2), pipelineWith("b", metav1.ConditionFalse, 2)}},
		{name: "one Pipeline progressing", status: metav1.ConditionFalse, message: "1 Pipeline is rolling out: ns/b;",
			pipelines: []pipelinev1.Pipeline{pipelineWith("a", metav1.ConditionFalse, 2), pipelineWith("b", metav1.ConditionTrue, 2)}},
		{name: "new Pipeline without status", status: metav1.ConditionFalse, message: "1 Pipeline is rolling out: ns/a;",
			pipelines: []pipelinev1.Pipeline{pipelineWith("a", "", 0)}},
		{name: "edited spec not reported on yet", status: metav1.ConditionFalse, message: "ns/a",
			pipelines: []pipelinev1.Pipeline{pipelineWith("a", metav1.ConditionFalse, 1)}},
		{name: "progressing but being deleted", status: metav1.ConditionTrue,
			pipelines: []pipelinev1.Pipeline{pipelineWith("a", metav1.ConditionTrue, 2, deleting)}},
		{name: "progressing but paused", status: metav1.ConditionTrue,
			pipelines: []pipelinev1.Pipeline{pipelineWith("a", metav1.ConditionTrue, 2, paused)}},
		{name: "names in order", status: metav1.ConditionFalse, message: "2 Pipelines are rolling out: ns/a, ns/c;",
			pipelines: []pipelinev1.Pipeline{pipelineWith("c", metav1.ConditionTrue, 2), pipelineWith("b", metav1.ConditionFalse, 2),
				pipelineWith("a", metav1.ConditionTrue, 2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := upgradeable(tt.pipelines)
			if c.Type != "Upgradeable" || c.Status != tt.status {
				t.Fatalf("%s = %s, want %s (%s)", c.Type, c.Status, tt.status, c.Message)
			}
			wantReason := pipelinev1.ReasonNoRollouts
			if tt.status == metav1.ConditionFalse {
				wantReason = pipelinev1.ReasonPipelinesRollingOut
			}
			if c.Reason != wantReason {
				t.Errorf("reason %q, want %q", c.Reason, wantReason)
			}
			if !strings.Contains(c.Message, tt.message) {
				t.Errorf("message %q does not contain %q", c.Message, tt.message)
			}
		})
	}
}

func TestUpgradeableNamesAtMostTenPipelines(t *testing.T) {
	var pipelines []pipelinev1.Pipeline
	for i := range 25 {
		pipelines = append(pipelines, pipelineWith(fmt.Sprintf("p%02d", i), metav1.ConditionTrue, 2))
	}
	c := upgradeable(pipelines)
	if !strings.HasPrefix(c.Message, "25 Pipelines are rolling out: ns/p00, ns/p01,") ||
		!strings.Contains(c.Message, "ns/p09, and 15 more;") || strings.Contains(c.Message, "ns/p10") {
		t.Errorf("message %q", c.Message)
	}
	if len(pipelines) != 25 || pipelines[10].Name != "p10" {
		t.Error("upgradeable modified its input")
	}
}
