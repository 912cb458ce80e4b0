package manager

import (
	"context"
	"crypto/tls"
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
		mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{
			Scheme:  testScheme,
			Metrics: MetricsServerOptions(addr, true, nil),
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
		// The endpoint's certificate is self-signed, generated in memory by the manager.
		scraper = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
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
