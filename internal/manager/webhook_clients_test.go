package manager

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ndsl-cn/pipeline-operator/config/samples"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver"
)

// TestIntegrationWebhookClientCertificate gives a real apiserver, by its admission
// configuration, a client certificate for webhooks, and runs the manager with
// --webhook-client-ca-file: the apiserver's admission calls (and its conversion calls, which
// carry no certificate) are answered, and a caller of the port without the certificate is
// refused before its body is read.
func TestIntegrationWebhookClientCertificate(t *testing.T) {
	testenv.RequireAssets(t)
	g := NewWithT(t)
	const clientName = "kube-apiserver-webhook-client"
	ca := testenv.NewClientCA(t)
	certPEM, keyPEM := ca.Issue(t, clientName)
	dir := t.TempDir()
	write := func(name, data string) string {
		path := filepath.Join(dir, name)
		g.Expect(os.WriteFile(path, []byte(data), 0o600)).To(Succeed())
		return path
	}
	caFile := write("ca.crt", string(ca.PEM))
	// The certificate the apiserver presents to every webhook ("*"), as docs/security.md says.
	kubeconfig := write("webhook-kubeconfig.yaml", fmt.Sprintf(`apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: %s
    client-key: %s
`, write("client.crt", string(certPEM)), write("client.key", string(keyPEM))))
	admission := write("admission.yaml", fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
`, kubeconfig))

	env := testenv.New()
	env.ControlPlane.GetAPIServer().Configure().Append("admission-control-config-file", admission)
	ctx, c, registry, addr := serveWebhooks(t, env, WebhookOptions{ClientCAFile: caFile, ClientNames: []string{clientName}})

	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-clients-"}}
	g.Expect(c.Create(ctx, namespace)).To(Succeed())
	// v1beta1: the apiserver calls the conversion webhook (without a certificate) and both
	// admission webhooks (with it).
	p, err := samples.PipelineV1beta1(namespace.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error { return c.Create(ctx, p.DeepCopy()) }).WithTimeout(30 * time.Second).
		WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(refusedCount(registry, webhookserver.RefusedUnauthenticated)).To(BeZero())

	for _, path := range []string{"/mutate-distri-infer-ndsl-cn-v1-pipeline", "/validate-distri-infer-ndsl-cn-v1-pipeline"} {
		code, msg := postInsecure(addr, path, strings.NewReader(admissionReview(`{}`, `{"username":"u"}`)))
		g.Expect(code).To(Equal(http.StatusForbidden), path+": "+msg)
		g.Expect(msg).To(ContainSubstring("a client certificate of the kube-apiserver is required"))
	}
	g.Expect(refusedCount(registry, webhookserver.RefusedUnauthenticated)).To(BeNumerically("==", 2))
}
