package manager

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/ndsl-cn/pipeline-operator/internal/controller/operatorcondition"
)

// metricsCertificate is what the metrics endpoint of o serves when it has no certificate of its
// own: the webhook server's, nil when none is kept.
func metricsCertificate(t *testing.T, o Options) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	t.Helper()
	certs, err := o.Webhooks.certificates(nil, o.MetricsServiceName)
	if err != nil {
		t.Fatal(err)
	}
	selfSigned := certs.selfSigned
	c := &tls.Config{}
	for _, opt := range o.metricsServer(selfSigned, nil).TLSOpts {
		opt(c)
	}
	if selfSigned != nil && c.GetCertificate != nil {
		if got, want := selfSigned.DNSNames(), o.MetricsServiceName+".ns.svc"; !slices.Contains(got, want) {
			t.Errorf("the webhook certificate names %v, not the metrics Service %s", got, want)
		}
	}
	return c.GetCertificate
}

// TestMetricsCertificate checks which certificate the metrics endpoint serves: the self-signed
// webhook certificate, which names the metrics Service, unless a metrics certificate is mounted,
// nothing is served (admission and conversion webhooks off) or their certificate is mounted.
func TestMetricsCertificate(t *testing.T) {
	t.Setenv(operatorcondition.EnvPodNamespace, "ns")
	empty := t.TempDir()
	mounted := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(mounted, f), []byte("mounted"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := Options{
		MetricsAddr: ":8443", SecureMetrics: true, MetricsCertDir: empty, MetricsServiceName: "metrics",
		Webhooks: WebhookOptions{Enabled: true, CertDir: empty, ServiceName: "webhook", SecretName: "certs"},
	}
	for _, tc := range []struct {
		name    string
		change  func(*Options)
		webhook bool
	}{
		{name: "nothing mounted", change: func(*Options) {}, webhook: true},
		{name: "metrics certificate mounted", change: func(o *Options) { o.MetricsCertDir = mounted }},
		{name: "webhook certificate mounted", change: func(o *Options) { o.Webhooks.CertDir = mounted }},
		{name: "admission and conversion off", change: func(o *Options) { o.Webhooks.Enabled = false }},
		{name: "admission off, conversion served", change: func(o *Options) {
			o.Webhooks.Enabled, o.Webhooks.ConversionCRD = false, "pipelines.distri-infer.ndsl.cn"
		}, webhook: true},
		{name: "plain HTTP", change: func(o *Options) { o.SecureMetrics = false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.change(&o)
			get := metricsCertificate(t, o)
			if !tc.webhook {
				if get != nil {
					t.Error("the metrics endpoint serves the webhook certificate")
				}
				return
			}
			if get == nil {
				t.Fatal("the metrics endpoint does not serve the webhook certificate")
			}
			if _, err := get(nil); err == nil {
				t.Error("a certificate is served before the Secret holds one")
			}
		})
	}
}

// TestNewRefusesAnInvalidClusterDomain checks that a --cluster-domain that is no DNS subdomain
// stops the manager before it starts, naming the value, rather than making URLs no pod resolves.
func TestNewRefusesAnInvalidClusterDomain(t *testing.T) {
	for _, domain := range []string{"cluster..local", "Cluster.Local", "cluster.local/x", "."} {
		if _, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{ClusterDomain: domain}); err == nil ||
			!strings.Contains(err.Error(), "cluster domain") {
			t.Errorf("cluster domain %q: error %v, want one naming the cluster domain", domain, err)
		}
	}
}
