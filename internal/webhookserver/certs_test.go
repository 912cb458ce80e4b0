package webhookserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/ndsl-cn/pipeline-operator/internal/leaderelection"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The names config/default gives the Secret, the Service and the webhook configurations; the
// roles of config/rbac name them.
const (
	deployedSecret     = "pipeline-operator-webhook-server-cert"
	deployedService    = "pipeline-operator-webhook-service"
	deployedMutating   = "pipeline-operator-mutating-webhook-configuration"
	deployedValidating = "pipeline-operator-validating-webhook-configuration"
	deployedMetrics    = "pipeline-operator-controller-manager-metrics-service"
)

// TestIntegrationSelfSigned runs replicas of the certificate rotation against a real apiserver.
func TestIntegrationSelfSigned(t *testing.T) {
	admin, cfg := startAPIServer(t)
	t.Run("replicas", func(t *testing.T) {
		t.Parallel()
		testReplicas(t, admin, cfg)
	})
	t.Run("renewal", func(t *testing.T) {
		t.Parallel()
		testRenewal(t, admin, cfg)
	})
	t.Run("names added", func(t *testing.T) {
		t.Parallel()
		testNamesAdded(t, admin, cfg)
	})
}

// testReplicas runs two replicas as the ServiceAccount of make deploy with the roles config/rbac
// gives it: they serve one certificate, which the CA injected into the webhook configurations
// verifies, and keep that so while they run — a configuration created later or whose caBundle is
// cleared gets the CA, a deleted Secret is made again with a new CA that every replica serves at
// once — without one request refused for want of permission.
func testReplicas(t *testing.T, admin client.Client, cfg *rest.Config) {
	g := newGomega(t)
	ctx := context.Background()
	ns := newNamespace(t, admin)

	refused := &refusals{}
	saCfg := serviceAccountConfig(t, admin, cfg, ns)
	saCfg.Wrap(refused.wrap)

	createMutating(t, admin, deployedMutating)
	replica := func() *runningReplica {
		return startReplica(t, saCfg, &SelfSigned{
			Namespace: ns, SecretName: deployedSecret, ServiceName: deployedService, CertDir: t.TempDir(),
			ExtraServices:                []string{deployedMetrics},
			MutatingWebhookConfiguration: deployedMutating, ValidatingWebhookConfiguration: deployedValidating,
		})
	}
	first, second := replica(), replica()
	serverName := deployedService + "." + ns + ".svc"

	// Both serve one certificate, verified by the CA in the mutating webhook configuration.
	var ca []byte
	g.Eventually(func(g Gomega) {
		ca = caBundles(g, admin, deployedMutating, "")[0]
		g.Expect(ca).NotTo(BeEmpty())
		a, err := served(first.addr, serverName, ca)
		g.Expect(err).NotTo(HaveOccurred())
		b, err := served(second.addr, serverName, ca)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.Raw).To(Equal(b.Raw), "two replicas serve different certificates: the Secret must be shared")
		g.Expect(first.certs.Ready(nil)).To(Succeed())
		g.Expect(second.certs.Ready(nil)).To(Succeed())
	}).Should(Succeed())
	_, err := served(first.addr, deployedService+"."+ns+".svc.cluster.local", ca)
	g.Expect(err).NotTo(HaveOccurred(), "the certificate names the Service's long DNS name too")
	for _, name := range []string{deployedMetrics + "." + ns + ".svc", deployedMetrics + "." + ns + ".svc.cluster.local"} {
		_, err = served(first.addr, name, ca)
		g.Expect(err).NotTo(HaveOccurred(), "the certificate names the metrics Service too")
	}
	g.Expect(os.ReadFile(filepath.Join(first.certs.CertDir, CAKey))).To(Equal(ca), "the CA is written to the certificate directory")

	secret := &corev1.Secret{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: deployedSecret}, secret)).To(Succeed())
	g.Expect(secret.Type).To(Equal(corev1.SecretTypeTLS))
	g.Expect(secret.Data).To(HaveKeyWithValue(CAKey, ca))
	g.Expect(secret.Data).To(HaveKey(CertKey))
	g.Expect(secret.Data).To(HaveKey(KeyKey))

	t.Log("a webhook configuration created after the replicas started gets the CA")
	createValidating(t, admin, deployedValidating)
	g.Eventually(func(g Gomega) {
		g.Expect(describeCAs(caBundles(g, admin, "", deployedValidating))).To(Equal(describeCAs([][]byte{ca})))
	}).Should(Succeed())

	t.Log("a caBundle cleared by an update is put back")
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: deployedMutating}, mutating)).To(Succeed())
	mutating.Webhooks[0].ClientConfig.CABundle = nil
	g.Expect(admin.Update(ctx, mutating)).To(Succeed())
	g.Expect(mutating.Webhooks[0].ClientConfig.CABundle).To(BeEmpty(), "the update cleared the caBundle")
	g.Eventually(func(g Gomega) {
		g.Expect(describeCAs(caBundles(g, admin, deployedMutating, ""))).To(Equal(describeCAs([][]byte{ca})))
	}).Should(Succeed())

	t.Log("a deleted Secret is made again, with a new CA that both running replicas serve")
	g.Expect(admin.Delete(ctx, secret)).To(Succeed())
	g.Eventually(func(g Gomega) {
		renewed := caBundles(g, admin, deployedMutating, deployedValidating)
		g.Expect(describeCAs(renewed)).To(HaveExactElements(describeCA(renewed[0]), describeCA(renewed[0])), "one CA in both")
		g.Expect(describeCA(renewed[0])).NotTo(Equal(describeCA(ca)), "a new CA")
		a, err := served(first.addr, serverName, renewed[0])
		g.Expect(err).NotTo(HaveOccurred())
		b, err := served(second.addr, serverName, renewed[0])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.Raw).To(Equal(b.Raw))
	}).Should(Succeed())

	g.Expect(refused.calls()).To(BeEmpty(), "requests refused for want of permission")
}

// testRenewal runs a replica whose certificate lasts seconds: it is renewed on the ticker, and
// the running replica serves the new one.
func testRenewal(t *testing.T, admin client.Client, cfg *rest.Config) {
	g := newGomega(t)
	ns := newNamespace(t, admin)
	createMutating(t, admin, "renewal")
	r := startReplica(t, cfg, &SelfSigned{
		Namespace: ns, SecretName: "renewal", ServiceName: "webhook", CertDir: t.TempDir(),
		MutatingWebhookConfiguration: "renewal",
		// Renewed about ten seconds after it is issued, checked every second.
		CAValidity: time.Hour, CertValidity: 40 * time.Second, RenewBefore: 30 * time.Second, CheckInterval: time.Second,
	})
	serverName := "webhook." + ns + ".svc"

	var initial *x509.Certificate
	g.Eventually(func(g Gomega) {
		var err error
		initial, err = served(r.addr, serverName, caBundles(g, admin, "renewal", "")[0])
		g.Expect(err).NotTo(HaveOccurred())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		ca := caBundles(g, admin, "renewal", "")[0]
		leaf, err := served(r.addr, serverName, ca)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(leaf.NotAfter).To(BeTemporally(">", initial.NotAfter), "the replica serves a renewed certificate")
	}).WithTimeout(2 * time.Minute).Should(Succeed())
}

// testNamesAdded starts a replica, as the ServiceAccount of make deploy with the roles config/rbac
// gives it, on a Secret whose certificate, from a valid CA, names only the webhook Service (as an
// earlier version wrote it): the replica has a certificate naming the metrics Service too issued
// from the same CA, so the caBundle of the webhook configurations stays valid throughout.
func testNamesAdded(t *testing.T, admin client.Client, cfg *rest.Config) {
	g := newGomega(t)
	ns := newNamespace(t, admin)
	refused := &refusals{}
	saCfg := serviceAccountConfig(t, admin, cfg, ns)
	saCfg.Wrap(refused.wrap)
	earlier := secretData(t, caName, deployedService+"."+ns+".svc", deployedService+"."+ns+".svc.cluster.local")
	mustCreate(t, admin, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: deployedSecret}, Type: corev1.SecretTypeTLS, Data: earlier,
	})
	r := startReplica(t, saCfg, &SelfSigned{
		Namespace: ns, SecretName: deployedSecret, ServiceName: deployedService, ExtraServices: []string{deployedMetrics},
		CertDir: t.TempDir(),
	})
	g.Eventually(func(g Gomega) {
		for _, name := range r.certs.DNSNames() {
			_, err := served(r.addr, name, earlier[CAKey])
			g.Expect(err).NotTo(HaveOccurred(), name)
		}
	}).Should(Succeed())
	secret := &corev1.Secret{}
	g.Expect(admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: deployedSecret}, secret)).To(Succeed())
	g.Expect(secret.Data[CAKey]).To(Equal(earlier[CAKey]), "the CA is kept")
	g.Expect(secret.Data["ca.key"]).To(Equal(earlier["ca.key"]))
	g.Expect(secret.Data[CertKey]).NotTo(Equal(earlier[CertKey]), "a new serving certificate")
	g.Expect(refused.calls()).To(BeEmpty(), "requests refused for want of permission")
}

// secretData is a Secret as the rotator fills it: a new CA named caName, with its key, and a
// serving certificate for dnsNames, valid for a year.
func secretData(t *testing.T, caName string, dnsNames ...string) map[string][]byte {
	t.Helper()
	cr := &rotator.CertRotator{CAName: caName, DNSName: dnsNames[0], ExtraDNSNames: dnsNames[1:],
		ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	now := time.Now()
	ca, err := cr.CreateCACert(now.Add(-time.Hour), now.Add(DefaultCAValidity))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := cr.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(DefaultCertValidity))
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{CAKey: ca.CertPEM, "ca.key": ca.KeyPEM, CertKey: cert, KeyKey: key}
}

// TestSelfSignedServing checks what the webhook server is given, without an apiserver: nothing
// until the Secret holds a key pair, then that key pair, replaced when the Secret changes, and
// ready only once the CA is injected too.
func TestSelfSignedServing(t *testing.T) {
	g := NewWithT(t)
	s := &SelfSigned{CertDir: filepath.Join(t.TempDir(), "certs")}
	_, err := s.GetCertificate(nil)
	g.Expect(err).To(HaveOccurred(), "no certificate before the Secret holds one")
	g.Expect(s.Ready(nil)).NotTo(Succeed())

	loaded, err := s.load(map[string][]byte{CertKey: {}, KeyKey: {}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded).To(BeFalse(), "an empty Secret is not served")
	_, err = s.GetCertificate(nil)
	g.Expect(err).To(HaveOccurred())
	g.Expect(HasCertificate(s.CertDir)).To(BeFalse())

	first, second := keyPair(t), keyPair(t)
	for _, data := range []map[string][]byte{first, second} {
		loaded, err := s.load(data)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(loaded).To(BeTrue())
		served, err := s.GetCertificate(nil)
		g.Expect(err).NotTo(HaveOccurred())
		b, _ := pem.Decode(data[CertKey])
		g.Expect(served.Certificate[0]).To(Equal(b.Bytes), "the Secret's certificate is served")
		for _, k := range []string{CAKey, CertKey, KeyKey} {
			g.Expect(os.ReadFile(filepath.Join(s.CertDir, k))).To(Equal(data[k]), "%s written to the certificate directory", k)
		}
	}
	loaded, err = s.load(second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loaded).To(BeFalse(), "the certificate served already is not loaded again")

	g.Expect(s.Ready(nil)).To(MatchError(ContainSubstring("CA is not injected")))
	s.injected = make(chan struct{})
	close(s.injected)
	g.Expect(s.Ready(nil)).To(Succeed())
}

// TestSelfSignedNames checks the names the certificate must carry, and which a certificate lacks.
func TestSelfSignedNames(t *testing.T) {
	g := NewWithT(t)
	s := &SelfSigned{Namespace: "ns", ServiceName: "webhook", ExtraServices: []string{"metrics"}}
	g.Expect(s.DNSNames()).To(Equal([]string{"webhook.ns.svc", "webhook.ns.svc.cluster.local",
		"metrics.ns.svc", "metrics.ns.svc.cluster.local"}))
	g.Expect(s.missingNames(keyPair(t)[CertKey])).To(Equal([]string{"webhook.ns.svc.cluster.local",
		"metrics.ns.svc", "metrics.ns.svc.cluster.local"}))
	g.Expect(s.missingNames(secretData(t, caName, s.DNSNames()...)[CertKey])).To(BeEmpty())
	g.Expect(s.missingNames(nil)).To(BeEmpty(), "an empty Secret lacks nothing: the rotator fills it")
}

// keyPair is the data of a Secret the rotator filled: a new CA and a serving certificate.
func keyPair(t *testing.T) map[string][]byte {
	t.Helper()
	cr := &rotator.CertRotator{CAName: caName, DNSName: "webhook.ns.svc", ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	now := time.Now()
	ca, err := cr.CreateCACert(now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := cr.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{CAKey: ca.CertPEM, CertKey: cert, KeyKey: key}
}

var (
	logs    = &testenv.SyncBuffer{}
	logOnce sync.Once
)

// startAPIServer starts a kube-apiserver and etcd for t and returns an admin client and config.
// The managers' logs are shown when t fails.
func startAPIServer(t *testing.T) (client.Client, *rest.Config) {
	t.Helper()
	testenv.RequireAssets(t)
	logOnce.Do(func() { logf.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true))) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// newGomega polls every 100 ms, for up to 30 s.
func newGomega(t *testing.T) Gomega {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(30 * time.Second)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	return g
}

func newNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-certs-"}}
	mustCreate(t, c, ns)
	return ns.Name
}

// serviceAccountConfig is a client config for the ServiceAccount controller-manager of ns bound
// to the roles of config/rbac/webhook_cert_role.yaml and leader_election_role.yaml (their Roles
// taken into ns).
func serviceAccountConfig(t *testing.T, c client.Client, cfg *rest.Config, ns string) *rest.Config {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "controller-manager"}}
	mustCreate(t, c, sa)
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}}
	data, err := os.ReadFile(testenv.RepoPath("config", "rbac", "webhook_cert_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	election, err := os.ReadFile(testenv.RepoPath("config", "rbac", "leader_election_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data = append(append(data, "\n---\n"...), election...)
	var roles int
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := utilyaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "Role":
			role := &rbacv1.Role{}
			mustDecode(t, doc, role)
			role.Namespace = ns
			mustCreate(t, c, role)
			mustCreate(t, c, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
				Subjects:   subjects,
			})
			roles++
		case "ClusterRole":
			role := &rbacv1.ClusterRole{}
			mustDecode(t, doc, role)
			role.Name += "-" + ns
			mustCreate(t, c, role)
			mustCreate(t, c, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role.Name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
				Subjects:   subjects,
			})
			roles++
		}
	}
	if roles != 3 {
		t.Fatalf("config/rbac/webhook_cert_role.yaml and leader_election_role.yaml hold %d roles, want two Roles and a ClusterRole", roles)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := c.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatal(err)
	}
	return &rest.Config{Host: cfg.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}}
}

func mustDecode(t *testing.T, doc []byte, obj any) {
	t.Helper()
	if err := utilyaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatal(err)
	}
}

// refusals records the requests the apiserver refused with 403.
type refusals struct {
	mu      sync.Mutex
	refused []string
}

func (r *refusals) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			r.mu.Lock()
			r.refused = append(r.refused, req.Method+" "+req.URL.String())
			r.mu.Unlock()
		}
		return resp, err
	})
}

func (r *refusals) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.refused...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// runningReplica is a manager serving a webhook server on addr with the certificate of certs.
type runningReplica struct {
	certs *SelfSigned
	addr  string
}

var replicas atomic.Int32

// startReplica runs a manager as cfg with a webhook server on a free loopback port that serves
// the certificate of certs, until t ends.
func startReplica(t *testing.T, cfg *rest.Config, certs *SelfSigned) *runningReplica {
	t.Helper()
	// Controller names are unique in a process.
	certs.Name = fmt.Sprintf("replica-%d", replicas.Add(1))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  testenv.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// The replicas elect a leader, as the deployed ones do: those that do not lead must
		// serve and be ready too.
		LeaderElection: true, LeaderElectionID: leaderelection.ID, LeaderElectionNamespace: certs.Namespace,
		LeaderElectionReleaseOnCancel: true,
		WebhookServer: webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = certs.GetCertificate }}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	mgr.GetWebhookServer().Register("/ok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	if err := certs.SetupWithManager(ctx, mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager of %s: %v", certs.Name, err)
		}
	})
	return &runningReplica{certs: certs, addr: net.JoinHostPort("127.0.0.1", fmt.Sprint(port))}
}

// served connects to the webhook server at addr as the apiserver would, trusting only ca and
// expecting serverName, and returns the certificate it serves.
func served(addr, serverName string, ca []byte) (*x509.Certificate, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no CA certificate in %q", ca)
	}
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get("https://" + serverName + "/ok")
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.TLS.PeerCertificates[0], nil
}

var (
	noSideEffects = admissionregistrationv1.SideEffectClassNone
	// Rules no request matches: the apiserver never calls these webhooks.
	rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
	}}
	clientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/ok")}
)

func createMutating(t *testing.T, c client.Client, name string) {
	t.Helper()
	mustCreate(t, c, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.example.com", SideEffects: &noSideEffects,
			AdmissionReviewVersions: []string{"v1"}, ClientConfig: clientConfig, Rules: rules}},
	})
}

func createValidating(t *testing.T, c client.Client, name string) {
	t.Helper()
	mustCreate(t, c, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.example.com", SideEffects: &noSideEffects,
			AdmissionReviewVersions: []string{"v1"}, ClientConfig: clientConfig, Rules: rules}},
	})
}

// describeCA names the CA certificate in pemBytes for assertions: subject, validity and
// fingerprint.
func describeCA(pemBytes []byte) string {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return fmt.Sprintf("no PEM (%d bytes)", len(pemBytes))
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s valid from %s to %s, SHA-256 %x", c.Subject, c.NotBefore, c.NotAfter, sha256.Sum256(c.Raw))
}

func describeCAs(bundles [][]byte) []string {
	out := make([]string, 0, len(bundles))
	for _, b := range bundles {
		out = append(out, describeCA(b))
	}
	return out
}

// caBundles returns the caBundle of every webhook of the mutating and the validating webhook
// configurations so named (an empty name is skipped), in order.
func caBundles(g Gomega, c client.Client, mutating, validating string) [][]byte {
	ctx := context.Background()
	var out [][]byte
	if mutating != "" {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: mutating}, m)).To(Succeed())
		for _, w := range m.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	}
	if validating != "" {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: validating}, v)).To(Succeed())
		for _, w := range v.Webhooks {
			out = append(out, w.ClientConfig.CABundle)
		}
	}
	return out
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}
