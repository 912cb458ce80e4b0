package manager

import (
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// TestIntegrationLocalConversion runs the manager as make run does (admission webhooks off,
// --local-conversion) against a real apiserver whose Pipeline CRD has no conversion webhook yet:
// the manager points the CRD at itself on loopback, and a Pipeline created as v1beta1 reads
// as v1.
func TestIntegrationLocalConversion(t *testing.T) {
	testenv.RequireAssets(t)
	g := NewWithT(t)
	env := testenv.New()
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	port := l.Addr().(*net.TCPAddr).Port
	g.Expect(l.Close()).To(Succeed())
	const crdName = "pipelines.distri-infer.ndsl.cn"
	// A registry of its own: the suite's managers register the operator's metrics in the global one.
	mgr, err := New(cfg, Options{MetricsAddr: "0", ProbeAddr: "0", SeveralInProcess: true, MetricsRegistry: prometheus.NewRegistry(), Webhooks: WebhookOptions{
		LocalConversion: true, Port: port, ConversionCRD: crdName, CertDir: t.TempDir(),
	}})
	g.Expect(err).NotTo(HaveOccurred())
	ctx := runManager(t, mgr)

	g.Eventually(func(g Gomega) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
		g.Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.WebhookConverter))
		g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.URL).To(HaveValue(HavePrefix("https://127.0.0.1:")))
		g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.Service).To(BeNil())
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "local-conversion-"}}
	g.Expect(c.Create(ctx, namespace)).To(Succeed())
	ns := namespace.Name
	seed, err := samples.PipelineV1beta1(ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Create(ctx, seed)).To(Succeed())
	got := &pipelinev1.Pipeline{}
	g.Eventually(func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "facedetection-pipeline"}, got)
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(got.Spec.ModelStorage.NFS).To(HaveValue(HaveField("Server", "192.168.20.235")))
}
