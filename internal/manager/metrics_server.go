// Package manager holds the options of the operator's controller manager: what its cache
// holds, its leader election and its metrics endpoint.
package manager

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// MetricsServerOptions are the options of the manager's metrics endpoint at bindAddress. When
// secure, it serves HTTPS and answers only callers that the kube-apiserver authenticates (a
// TokenReview of their bearer token) and authorizes to get /metrics (a SubjectAccessReview):
// 401 without a valid token, 403 without the permission. Otherwise it serves plain HTTP to
// anyone. tlsOpts adjust the TLS configuration of the secure endpoint.
//
// The secure endpoint serves the certificate in certDir (tls.crt and tls.key, as a cert-manager
// Secret is mounted), reloaded when the files change, so that a scraper can verify it with the
// issuer's CA; when certDir holds none (or is empty: controller-runtime's default directory), it
// serves a self-signed certificate made at start, which no scraper can verify.
func MetricsServerOptions(bindAddress string, secure bool, certDir string, tlsOpts []func(*tls.Config)) metricsserver.Options {
	opts := metricsserver.Options{
		BindAddress:   bindAddress,
		SecureServing: secure,
		CertDir:       certDir,
		TLSOpts:       tlsOpts,
	}
	if secure {
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}
