package webhookserver

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// tlsClient is a client with a certificate of common name cn that ca issued.
func tlsClient(t *testing.T, ca *testenv.ClientCA, cn string) *http.Client {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, cn)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}} //nolint:gosec // a test server's own certificate
}

// With RequireClients, the admission paths answer only a client certificate of the CA (and of
// a listed name), refused 403 before the body is read; the conversion path answers anyone.
func TestServerRequiresClientCertificates(t *testing.T) {
	ca, other := testenv.NewClientCA(t), testenv.NewClientCA(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	s, addr, seen := boundedServerWith(t, DefaultLimits(), func(s *Server) error {
		return s.RequireClients(caFile, []string{"kube-apiserver-webhook-client"})
	})
	call := func(c *http.Client, path string) (int, string) {
		t.Helper()
		resp, err := c.Post("https://"+addr+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			return 0, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name   string
		client *http.Client
		path   string
		want   int
		says   string
	}{
		{"no certificate", testClient(), "/validate", http.StatusForbidden, "a client certificate of the kube-apiserver is required"},
		{"another CA's certificate", tlsClient(t, other, "kube-apiserver-webhook-client"), "/validate", 0, ""},
		{"another name", tlsClient(t, ca, "someone"), "/validate", http.StatusForbidden, `client certificate "someone" is not one of the webhook's clients`},
		{"the apiserver's certificate", tlsClient(t, ca, "kube-apiserver-webhook-client"), "/validate", http.StatusOK, "2"},
		{"conversion, no certificate", testClient(), ConversionPath, http.StatusOK, "2"},
	} {
		code, body := call(tc.client, tc.path)
		// A certificate of another CA fails the handshake itself.
		if code != tc.want || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %q, want %d with %q", tc.name, code, body, tc.want, tc.says)
		}
	}
	if got := refused(s, RefusedUnauthenticated); got != 2 {
		t.Errorf("refused unauthenticated = %v, want 2", got)
	}
	if got := seen.Load(); got != 2 {
		t.Errorf("the webhooks saw %d requests, want the apiserver's and the conversion", got)
	}
}
