package storageversion

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// previousCRD is the CRD of the releases before v1: v1beta1 alone, stored.
func previousCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := testenv.PipelineCRD(t)
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1beta1" {
			v.Storage = true
			crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{v}
			return crd
		}
	}
	t.Fatal("the CRD has no v1beta1")
	return nil
}

// TestIntegrationMigration upgrades a CRD holding v1beta1 Pipelines to the current one, as an
// upgrade of the operator does, migrates, and proves the Pipelines are stored as v1: with the
// conversion turned off, they read as v1 as they are.
func TestIntegrationMigration(t *testing.T) {
	testenv.RequireAssets(t)
	g := NewWithT(t)
	env := &envtest.Environment{CRDs: []*apiextensionsv1.CustomResourceDefinition{previousCRD(t)}}
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	g.Expect(testenv.ServeConversion(ctx, env)).To(Succeed())
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	const ns = "stored"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for i := range 3 {
		// The releases before v1 served v1beta1 alone: their users wrote the seed as it is.
		p, err := samples.PipelineV1beta1(ns)
		g.Expect(err).NotTo(HaveOccurred())
		p.Name = fmt.Sprintf("pipeline-%d", i)
		g.Expect(c.Create(ctx, p)).To(Succeed())
	}

	t.Log("the operator's upgrade brings the current CRD, which stores v1 and converts through the webhook")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: CRD}, crd)).To(Succeed())
	crd.Spec = testenv.PipelineCRD(t).Spec
	url := fmt.Sprintf("https://%s:%d/convert", env.WebhookInstallOptions.LocalServingHost, env.WebhookInstallOptions.LocalServingPort)
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: env.WebhookInstallOptions.LocalServingCAData}}}
	g.Expect(c.Update(ctx, crd)).To(Succeed())
	g.Eventually(func() []string {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: CRD}, crd)).To(Succeed())
		return crd.Status.StoredVersions
	}).Should(ConsistOf("v1beta1", "v1"))

	m := &Migration{Client: c}
	patched, migrated, err := m.Run(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(migrated).To(BeTrue())
	g.Expect(patched).To(Equal(3))
	g.Expect(c.Get(ctx, client.ObjectKey{Name: CRD}, crd)).To(Succeed())
	g.Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))

	t.Log("with the conversion off, the stored Pipelines read as v1 as they are: they are stored as v1")
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	g.Expect(c.Update(ctx, crd)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for i := range 3 {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(pipelinev1.GroupVersion.WithKind("Pipeline"))
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("pipeline-%d", i)}, u)).To(Succeed())
			server, _, _ := unstructured.NestedString(u.Object, "spec", "modelStorage", "nfs", "server")
			g.Expect(server).To(Equal("192.168.20.235"), "pipeline-%d is stored as v1", i)
			steps, _, _ := unstructured.NestedSlice(u.Object, "spec", "steps")
			g.Expect(steps).To(HaveLen(2))
			g.Expect(steps[0]).To(HaveKeyWithValue("name", "step-1"))
		}
	}).Should(Succeed())

	t.Log("a second run finds nothing to do")
	patched, migrated, err = m.Run(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(migrated).To(BeFalse())
	g.Expect(patched).To(BeZero())
}
