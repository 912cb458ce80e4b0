package pipeline

import (
	"context"

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

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/controller/operatorcondition"
)

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
		env := map[string]string{operatorcondition.EnvOperatorConditionName: key.Name, operatorcondition.EnvPodNamespace: ns}
		condition, err := operatorcondition.New(c, apiv2.ConditionType(apiv2.Upgradeable), func(k string) string { return env[k] })
		Expect(err).NotTo(HaveOccurred())
		startOwnManager(ns, ownManagerOptions{condition: condition})
		Eventually(upgradeable).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(upgradeable(Default).Reason).To(Equal(pipelinev1.ReasonNoRollouts))

		By("a new Pipeline rolls out: not upgradeable, and the message names it")
		p := createSample(ctx, ns, forOwnManagers(ns))
		Eventually(upgradeable).Should(HaveField("Status", metav1.ConditionFalse))
		cond := upgradeable(Default)
		Expect(cond.Reason).To(Equal(pipelinev1.ReasonPipelinesRollingOut))
		Expect(cond.Message).To(ContainSubstring(ns + "/" + p.Name))

		By("once it is running, upgradeable again")
		bindStorage(ctx, p)
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Eventually(upgradeable).Should(HaveField("Status", metav1.ConditionTrue))

		By("a spec change rolls out again")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Image = "nginx:1.27" })
		Eventually(upgradeable).Should(HaveField("Status", metav1.ConditionFalse))
		rollOut(ctx, p)
		Eventually(upgradeable).Should(HaveField("Status", metav1.ConditionTrue))
	})
})
