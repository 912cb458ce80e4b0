package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/ndsl-cn/pipeline-operator/config/samples"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver"
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
		// The certificate in the directory wins over the webhook certificate.
		webhookCert := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return nil, errors.New("the mounted certificate must be served, not the webhook certificate")
		}
		mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{
			Scheme:  testScheme,
			Metrics: MetricsServerOptions(addr, true, certDir, webhookCert, nil),
			Cache:   apply.CacheOptions(),
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
			g.Expect(body).To(ContainSubstring(metrics.MetricPipelines + `{phase="Unknown"} 1`))
			g.Expect(body).To(ContainSubstring(fmt.Sprintf(`%s{namespace=%q,phase="Unknown",pipeline="facedetection-pipeline"} 1`,
				metrics.MetricPipelinePhase, ns)))
		}).Should(Succeed())
	})
})

// The names config/default gives the webhook certificate's Secret, the webhook Service and the
// metrics Service, and the CA the manager names.
const (
	webhookSecret  = "pipeline-operator-webhook-server-cert"
	webhookService = "pipeline-operator-webhook-service"
	metricsService = "pipeline-operator-controller-manager-metrics-service"
	webhookCAName  = "pipeline-operator-webhook-ca"
)

var _ = Describe("The secure metrics endpoint without a mounted certificate", Ordered, func() {
	var (
		ctx   context.Context
		ns    string
		addr  string
		names []string
	)
	// presented is the certificate the endpoint presents to a client that trusts only the CA of
	// the webhook Secret's data and expects serverName, as the ServiceMonitor of config/prometheus.
	presented := func(data map[string][]byte, serverName string) (*x509.Certificate, error) {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(data[webhookserver.CAKey]) {
			return nil, fmt.Errorf("no CA in the Secret")
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{
			RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})
		if err != nil {
			return nil, err
		}
		defer func() { _ = conn.Close() }()
		return conn.ConnectionState().PeerCertificates[0], nil
	}
	secretData := func(g Gomega) map[string][]byte {
		secret := &corev1.Secret{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: webhookSecret}, secret)).To(Succeed())
		return secret.Data
	}

	BeforeAll(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
		addr = freeAddress()
		By("running a manager that keeps the self-signed webhook certificate, naming the metrics Service too")
		certs := &webhookserver.SelfSigned{
			Namespace: ns, SecretName: webhookSecret, ServiceName: webhookService,
			ExtraServices: []string{metricsService}, CertDir: GinkgoT().TempDir(), Name: "metrics-test-certificate",
		}
		names = certs.DNSNames()[2:]
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:  testScheme,
			Metrics: MetricsServerOptions(addr, true, GinkgoT().TempDir(), certs.GetCertificate, nil),
			Cache:   apply.CacheOptions(),
		})
		Expect(err).NotTo(HaveOccurred())
		mgrCtx, cancel := context.WithCancel(ctx)
		DeferCleanup(cancel)
		Expect(certs.SetupWithManager(mgrCtx, mgr)).To(Succeed())
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mgrCtx)).To(Succeed())
		}()
	})

	It("presents the webhook certificate, which the webhook Secret's CA verifies for the metrics Service", func() {
		Expect(names).To(Equal([]string{metricsService + "." + ns + ".svc", metricsService + "." + ns + ".svc.cluster.local"}))
		Eventually(func(g Gomega) {
			data := secretData(g)
			for _, name := range names {
				leaf, err := presented(data, name)
				g.Expect(err).NotTo(HaveOccurred(), name)
				g.Expect(pemOf(leaf)).To(Equal(data[webhookserver.CertKey]), "the Secret's certificate")
			}
		}).Should(Succeed())
	})

	It("presents a renewed certificate as soon as the Secret holds it, without a restart", func() {
		before := secretData(Default)
		renewed := newCertificate(append([]string{webhookService + "." + ns + ".svc", webhookService + "." + ns + ".svc.cluster.local"}, names...))
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: webhookSecret}, secret)).To(Succeed())
		secret.Data = renewed
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())

		Eventually(func(g Gomega) {
			leaf, err := presented(renewed, names[0])
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pemOf(leaf)).To(Equal(renewed[webhookserver.CertKey]))
		}).Should(Succeed())
		_, err := presented(before, names[0])
		Expect(err).To(HaveOccurred(), "the former CA verifies the endpoint no more")
		Expect(secretData(Default)).To(Equal(renewed), "the manager kept the renewed certificate")
	})
})

// newCertificate is the data of a webhook Secret holding a new CA (named as the manager names
// it, with its key) and a serving certificate for dnsNames, as a renewal writes it.
func newCertificate(dnsNames []string) map[string][]byte {
	GinkgoHelper()
	cr := &rotator.CertRotator{CAName: webhookCAName, DNSName: dnsNames[0], ExtraDNSNames: dnsNames[1:],
		ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	now := time.Now()
	ca, err := cr.CreateCACert(now.Add(-time.Hour), now.Add(webhookserver.DefaultCAValidity))
	Expect(err).NotTo(HaveOccurred())
	cert, key, err := cr.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(webhookserver.DefaultCertValidity))
	Expect(err).NotTo(HaveOccurred())
	return map[string][]byte{webhookserver.CAKey: ca.CertPEM, "ca.key": ca.KeyPEM,
		webhookserver.CertKey: cert, webhookserver.KeyKey: key}
}

// pemOf is c in PEM, as a Secret holds it.
func pemOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}
