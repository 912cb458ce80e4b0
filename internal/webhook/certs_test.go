package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// TestIntegrationSelfSigned runs the certificate provisioning against a real apiserver: two
// replicas agree on one certificate, a certificate close to expiry is replaced, and the CA is
// injected into the webhook configurations and verifies the serving certificate.
func TestIntegrationSelfSigned(t *testing.T) {
	testenv.RequireAssets(t)
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
	ctx := context.Background()

	const ns = "pipeline-operator-system"
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	none := admissionregistrationv1.SideEffectClassNone
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
	}}
	svc := &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "webhook", Path: ptr.To("/x")}
	mustCreate(t, c, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "mutating"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.example.com", SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: svc}, Rules: rules}},
	})
	mustCreate(t, c, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "validating"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.example.com", SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: svc}, Rules: rules}},
	})

	replica := func(dir string, now time.Time) *SelfSigned {
		return &SelfSigned{
			Client: c, Namespace: ns, SecretName: "webhook-cert", ServiceName: "webhook", CertDir: dir,
			MutatingWebhookConfiguration: "mutating", ValidatingWebhookConfiguration: "validating",
			Now: func() time.Time { return now },
		}
	}
	now := time.Now()
	first, second := replica(t.TempDir(), now), replica(t.TempDir(), now)
	if HasCertificate(first.CertDir) {
		t.Fatal("an empty directory holds no certificate")
	}
	if err := first.Ensure(ctx); err != nil {
		t.Fatalf("first replica: %v", err)
	}
	if err := second.Ensure(ctx); err != nil {
		t.Fatalf("second replica: %v", err)
	}
	if !HasCertificate(first.CertDir) {
		t.Fatal("Ensure wrote no certificate")
	}
	cert1, cert2 := read(t, first.CertDir, CertKey), read(t, second.CertDir, CertKey)
	if string(cert1) != string(cert2) {
		t.Fatal("two replicas serve different certificates: the Secret must be shared")
	}
	ca := read(t, first.CertDir, CAKey)
	assertInjected(t, c, ca)
	assertServes(t, first.CertDir, ca, "webhook."+ns+".svc")

	// Ten days before it expires, the certificate is within its renewal window.
	later := replica(t.TempDir(), now.Add(certValidity-10*24*time.Hour))
	if err := later.Ensure(ctx); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	if string(read(t, later.CertDir, CertKey)) == string(cert1) {
		t.Fatal("a certificate about to expire was not replaced")
	}
	assertInjected(t, c, read(t, later.CertDir, CAKey))

	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webhook-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	if secret.Type != corev1.SecretTypeTLS || string(secret.Data[CertKey]) != string(read(t, later.CertDir, CertKey)) {
		t.Fatal("the Secret does not hold the renewed certificate")
	}
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func assertInjected(t *testing.T, c client.Client, ca []byte) {
	t.Helper()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "mutating"}, m); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "validating"}, v); err != nil {
		t.Fatal(err)
	}
	if string(m.Webhooks[0].ClientConfig.CABundle) != string(ca) || string(v.Webhooks[0].ClientConfig.CABundle) != string(ca) {
		t.Fatal("the CA is not the caBundle of both webhook configurations")
	}
}

// assertServes starts a TLS server with the certificate in dir and connects to it as the
// apiserver would: trusting only ca, expecting serverName.
func assertServes(t *testing.T, dir string, ca []byte, serverName string) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertKey), filepath.Join(dir, KeyKey))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, ln.Addr().String())
		},
	}}
	resp, err := cl.Get("https://" + serverName + "/")
	if err != nil {
		t.Fatalf("the CA does not verify the serving certificate for %s: %v", serverName, err)
	}
	_ = resp.Body.Close()
}
