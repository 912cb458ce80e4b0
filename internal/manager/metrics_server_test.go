package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/ndsl-cn/pipeline-operator/config/samples"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
)

// clusterRoleOf reads a ClusterRole of config/rbac.
func clusterRoleOf(file string) *rbacv1.ClusterRole {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", file))
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	Expect(yaml.UnmarshalStrict(data, role)).To(Succeed())
	Expect(role.Kind).To(Equal("ClusterRole"))
	return role
}

// serviceAccountToken creates the ServiceAccount ns/name, binds it to roles and returns a
// token the apiserver issued for it (TokenRequest).
func serviceAccountToken(ctx context.Context, ns, name string, roles ...*rbacv1.ClusterRole) string {
	GinkgoHelper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	Expect(k8sClient.Create(ctx, sa)).To(Succeed())
	for _, role := range roles {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{GenerateName: role.Name + "-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		}
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	Expect(k8sClient.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	Expect(tr.Status.Token).NotTo(BeEmpty())
	return tr.Status.Token
}

// freeAddress is a loopback address with a port nobody listens on.
func freeAddress() string {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	Expect(l.Close()).To(Succeed())
	return addr
}

// metricsServerName is the DNS name of the metrics Service of make deploy, which the
// ServiceMonitor of config/prometheus expects in the manager's certificate.
const metricsServerName = "pipeline-operator-controller-manager-metrics-service.pipeline-operator-system.svc"

var _ = Describe("The secure metrics endpoint", Ordered, func() {
	var (
		ctx     context.Context
		ns      string
		url     string
		scraper *http.Client
	)
	// scrape gets /metrics with token (none when empty) and returns the status and body.
	scrape := func(token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := scraper.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}

	BeforeAll(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)

		By("running a manager as the ServiceAccount of make deploy, with the roles config/rbac gives it")
		roles := []*rbacv1.ClusterRole{clusterRoleOf("role.yaml"), clusterRoleOf("metrics_auth_role.yaml")}
		for _, r := range roles {
			Expect(k8sClient.Create(ctx, r)).To(Succeed())
		}
		token := serviceAccountToken(ctx, ns, "controller-manager", roles...)
		mgrCfg := &rest.Config{Host: cfg.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}}
		addr := freeAddress()
		By("serving a certificate for the metrics Service's name from a directory, as cert-manager's Secret is mounted")
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(metricsServerName, nil, nil)
		Expect(err).NotTo(HaveOccurred())
		certDir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(certDir, "tls.crt"), certPEM, 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(certDir, "tls.key"), keyPEM, 0o600)).To(Succeed())
		mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{
			Scheme:  testScheme,
			Metrics: MetricsServerOptions(addr, true, certDir, nil),
			Cache:   CacheOptions(),
		})
		Expect(err).NotTo(HaveOccurred())
		_, err = metrics.New(ctrlmetrics.Registry, mgr.GetCache())
		Expect(err).NotTo(HaveOccurred())
		mgrCtx, cancel := context.WithCancel(ctx)
		DeferCleanup(cancel)
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mgrCtx)).To(Succeed())
		}()

		p, err := samples.Pipeline(ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, p)).To(Succeed())

		url = fmt.Sprintf("https://%s/metrics", addr)
		// The scraper verifies the certificate, as the ServiceMonitor of config/prometheus does:
		// with the issuer's CA and the metrics Service's DNS name.
		roots := x509.NewCertPool()
		Expect(roots.AppendCertsFromPEM(certPEM)).To(BeTrue())
		scraper = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, ServerName: metricsServerName, MinVersion: tls.VersionTLS12}}}
		Eventually(func() error { _, _, err := scrape(""); return err }).Should(Succeed(), "the endpoint serves HTTPS")
	})

	It("answers 401 to a request without a token", func() {
		status, _, err := scrape("")
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusUnauthorized))

		By("refusing a token the apiserver does not know (controller-runtime's filter answers 500 there)")
		status, body, err := scrape("not-a-token")
		Expect(err).NotTo(HaveOccurred())
		Expect(status).NotTo(Equal(http.StatusOK))
		Expect(body).NotTo(ContainSubstring(metrics.MetricPipelines))
	})

	It("answers 403 to a ServiceAccount that may not get /metrics", func() {
		status, body, err := scrape(serviceAccountToken(ctx, ns, "no-metrics"))
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusForbidden))
		Expect(body).NotTo(ContainSubstring(metrics.MetricPipelines))
	})

	It("serves the operator's metrics to a ServiceAccount bound to the metrics-reader role", func() {
		reader := clusterRoleOf("metrics_reader_role.yaml")
		Expect(k8sClient.Create(ctx, reader)).To(Succeed())
		token := serviceAccountToken(ctx, ns, "prometheus", reader)
		Eventually(func(g Gomega) {
			status, body, err := scrape(token)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusOK))
			g.Expect(body).To(ContainSubstring(metrics.MetricPipelines + `{phase="unknown"} 1`))
			g.Expect(body).To(ContainSubstring(fmt.Sprintf(`%s{namespace=%q,phase="unknown",pipeline="facedetection-pipeline"} 1`,
				metrics.MetricPipelinePhase, ns)))
		}).Should(Succeed())
	})
})
