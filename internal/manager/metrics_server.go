// Package manager assembles the operator's controller manager: what its cache holds, its
// leader election and its metrics endpoint, the Pipeline and OperatorCondition controllers, and
// the admission webhooks with their certificate.
package manager

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver"
)

// GetCertificateFunc serves a TLS certificate, as tls.Config.GetCertificate.
type GetCertificateFunc = func(*tls.ClientHelloInfo) (*tls.Certificate, error)

// MetricsServerOptions are the options of the manager's metrics endpoint at bindAddress. When
// secure, it serves HTTPS and answers only callers that the kube-apiserver authenticates (a
// TokenReview of their bearer token) and authorizes to get /metrics (a SubjectAccessReview):
// 401 without a valid token, 403 without the permission. Otherwise it serves plain HTTP to
// anyone. tlsOpts adjust the TLS configuration of the secure endpoint.
//
// The secure endpoint serves, first found:
//   - the certificate in certDir (tls.crt and tls.key, as a cert-manager Secret is mounted),
//     reloaded when the files change, so that a scraper can verify it with the issuer's CA;
//   - the certificate of fallback, when not nil: the manager's self-signed webhook certificate,
//     which also names the metrics Service, so that a scraper verifies it with the ca.crt of
//     the webhook Secret; fallback is asked at every handshake, so a renewal is served at once;
//   - a self-signed certificate made at start, which no scraper can verify.
//
// An empty certDir is controller-runtime's default directory.
func MetricsServerOptions(bindAddress string, secure bool, certDir string, fallback GetCertificateFunc,
	tlsOpts []func(*tls.Config)) metricsserver.Options {
	opts := metricsserver.Options{
		BindAddress:   bindAddress,
		SecureServing: secure,
		CertDir:       certDir,
		TLSOpts:       tlsOpts,
	}
	if !secure {
		return opts
	}
	opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	if fallback != nil && !hasCertificate(certDir) {
		// controller-runtime reads certDir only when no TLS option sets GetCertificate.
		opts.TLSOpts = append(slices.Clip(tlsOpts), func(c *tls.Config) { c.GetCertificate = fallback })
	}
	return opts
}

// hasCertificate reports whether the metrics certificate directory dir (controller-runtime's
// default when empty) holds tls.crt and tls.key, as controller-runtime looks for them.
func hasCertificate(dir string) bool {
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "k8s-metrics-server", "serving-certs")
	}
	return webhookserver.HasCertificate(dir)
}
