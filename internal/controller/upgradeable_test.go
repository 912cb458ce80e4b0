package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	olmcrds "github.com/operator-framework/api/crds"
	apiv2 "github.com/operator-framework/api/pkg/operators/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// pipelineWith is a Pipeline of generation 2 whose Progressing condition, if status is not
// empty, has the given status and generation.
func pipelineWith(name string, status metav1.ConditionStatus, gen int64, edit ...func(*pipelinev1beta1.Pipeline)) pipelinev1beta1.Pipeline {
	p := pipelinev1beta1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 2}}
	if status != "" {
		p.Status.Conditions = []metav1.Condition{{Type: pipelinev1beta1.ConditionProgressing, Status: status, ObservedGeneration: gen}}
	}
	for _, e := range edit {
		e(&p)
	}
	return p
}

func TestUpgradeable(t *testing.T) {
	deleting := func(p *pipelinev1beta1.Pipeline) { now := metav1.Now(); p.DeletionTimestamp = &now }
	paused := func(p *pipelinev1beta1.Pipeline) {
		p.Annotations = map[string]string{pipelinev1beta1.PausedAnnotation: "true"}
	}
	tests := []struct {
		name      string
		pipelines []pipelinev1beta1.Pipeline
		status    metav1.ConditionStatus
		message   string
	}{
		{name: "no Pipeline", status: metav1.ConditionTrue, message: "No Pipeline is rolling out"},
		{name: "every Pipeline rolled out", status: metav1.ConditionTrue, pipelines: []pipelinev1beta1.Pipeline{
			pipelineWith("a", metav1.ConditionFalse, 2), pipelineWith("b", metav1.ConditionFalse, 2)}},
		{name: "one Pipeline progressing", status: metav1.ConditionFalse, message: "1 Pipeline is rolling out: ns/b;",
			pipelines: []pipelinev1beta1.Pipeline{pipelineWith("a", metav1.ConditionFalse, 2), pipelineWith("b", metav1.ConditionTrue, 2)}},
		{name: "new Pipeline without status", status: metav1.ConditionFalse, message: "1 Pipeline is rolling out: ns/a;",
			pipelines: []pipelinev1beta1.Pipeline{pipelineWith("a", "", 0)}},
		{name: "edited spec not reported on yet", status: metav1.ConditionFalse, message: "ns/a",
			pipelines: []pipelinev1beta1.Pipeline{pipelineWith("a", metav1.ConditionFalse, 1)}},
		{name: "progressing but being deleted", status: metav1.ConditionTrue,
			pipelines: []pipelinev1beta1.Pipeline{pipelineWith("a", metav1.ConditionTrue, 2, deleting)}},
		{name: "progressing but paused", status: metav1.ConditionTrue,
			pipelines: []pipelinev1beta1.Pipeline{pipelineWith("a", metav1.ConditionTrue, 2, paused)}},
		{name: "names in order", status: metav1.ConditionFalse, message: "2 Pipelines are rolling out: ns/a, ns/c;",
			pipelines: []pipelinev1beta1.Pipeline{pipelineWith("c", metav1.ConditionTrue, 2), pipelineWith("b", metav1.ConditionFalse, 2),
				pipelineWith("a", metav1.ConditionTrue, 2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := upgradeable(tt.pipelines)
			if c.Type != "Upgradeable" || c.Status != tt.status {
				t.Fatalf("%s = %s, want %s (%s)", c.Type, c.Status, tt.status, c.Message)
			}
			wantReason := pipelinev1beta1.ReasonNoRollouts
			if tt.status == metav1.ConditionFalse {
				wantReason = pipelinev1beta1.ReasonPipelinesRollingOut
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
	var pipelines []pipelinev1beta1.Pipeline
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

var _ = Describe("The Upgradeable OperatorCondition", func() {
	It("is False while a Pipeline rolls out and True otherwise", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)

		By("installing OLM's OperatorCondition CRD and the operator's OperatorCondition, as OLM does")
		_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{olmcrds.OperatorCondition()}})
		Expect(err).NotTo(HaveOccurred())
		c, err := client.New(cfg, client.Options{Scheme: lifecycleScheme()})
		Expect(err).NotTo(HaveOccurred())
		key := types.NamespacedName{Namespace: ns, Name: "pipeline-operator.v0.1.0"}
		Expect(c.Create(ctx, &apiv2.OperatorCondition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}})).To(Succeed())
		upgradeable := func(g Gomega) *metav1.Condition {
			oc := &apiv2.OperatorCondition{}
			g.Expect(c.Get(ctx, key, oc)).To(Succeed())
			cond := meta.FindStatusCondition(oc.Spec.Conditions, apiv2.Upgradeable)
			g.Expect(cond).NotTo(BeNil())
			return cond
		}

		By("with no Pipeline, the operator may be upgraded")
		startOwnManager(ns, ownManagerOptions{condition: &operatorCondition{client: c, key: key, condType: apiv2.ConditionType(apiv2.Upgradeable)}})
		Eventually(upgradeable).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(upgradeable(Default).Reason).To(Equal(pipelinev1beta1.ReasonNoRollouts))

		By("a new Pipeline rolls out: not upgradeable, and the message names it")
		p := createSample(ctx, ns, forOwnManagers(ns))
		Eventually(upgradeable).Should(HaveField("Status", metav1.ConditionFalse))
		cond := upgradeable(Default)
		Expect(cond.Reason).To(Equal(pipelinev1beta1.ReasonPipelinesRollingOut))
		Expect(cond.Message).To(ContainSubstring(ns + "/" + p.Name))

		By("once it is running, upgradeable again")
		bindStorage(ctx, p)
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1beta1.PipelinePhaseRunning))
		Eventually(upgradeable).Should(HaveField("Status", metav1.ConditionTrue))

		By("a spec change rolls out again")
		updatePipeline(ctx, p, func(p *pipelinev1beta1.Pipeline) { p.Spec.Steps[1].Image = "nginx:1.27" })
		Eventually(upgradeable).Should(HaveField("Status", metav1.ConditionFalse))
		rollOut(ctx, p)
		Eventually(upgradeable).Should(HaveField("Status", metav1.ConditionTrue))
	})
})
