// Package webhook provides the serving certificate of the manager's webhook server when no
// certificate is mounted (make deploy without cert-manager): a self-signed CA and a serving
// certificate kept in a Secret shared by every replica, with the CA injected into the
// Pipeline webhook configurations.
package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the certificate Secret and files of the certificate directory.
const (
	CAKey   = "ca.crt"
	CertKey = corev1.TLSCertKey
	KeyKey  = corev1.TLSPrivateKeyKey
)

// Validity of the self-signed certificates, and how close to expiry they are replaced.
const (
	certValidity = 10 * 365 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
)

// HasCertificate reports whether dir already holds a serving certificate and key, mounted by
// cert-manager or OLM; then SelfSigned is not needed.
func HasCertificate(dir string) bool {
	for _, f := range []string{CertKey, KeyKey} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}

// SelfSigned provisions the webhook server's certificate without cert-manager.
type SelfSigned struct {
	// Client must not be cached: it runs before the manager's caches start.
	Client client.Client
	// Namespace is the manager's namespace; the Secret and the webhook Service live there.
	Namespace string
	// SecretName is the Secret holding the CA and the serving certificate.
	SecretName string
	// ServiceName is the webhook Service; the certificate is valid for its DNS names.
	ServiceName string
	// CertDir receives tls.crt, tls.key and ca.crt for the webhook server.
	CertDir string
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration get the CA as caBundle;
	// an empty name is skipped.
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Ensure makes sure the Secret holds a CA and a serving certificate valid for the Service
// (creating or renewing them), writes them to CertDir and injects the CA into the webhook
// configurations. Every replica runs it at start; they agree through the Secret.
func (s *SelfSigned) Ensure(ctx context.Context) error {
	secret, err := s.ensureSecret(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.CertDir, 0o700); err != nil {
		return fmt.Errorf("create webhook certificate directory: %w", err)
	}
	for _, k := range []string{CAKey, CertKey, KeyKey} {
		if err := os.WriteFile(filepath.Join(s.CertDir, k), secret.Data[k], 0o600); err != nil {
			return fmt.Errorf("write webhook certificate %s: %w", k, err)
		}
	}
	return s.injectCA(ctx, secret.Data[CAKey])
}

func (s *SelfSigned) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *SelfSigned) dnsNames() []string {
	return []string{
		s.ServiceName + "." + s.Namespace + ".svc",
		s.ServiceName + "." + s.Namespace + ".svc.cluster.local",
	}
}

func (s *SelfSigned) ensureSecret(ctx context.Context) (*corev1.Secret, error) {
	key := client.ObjectKey{Namespace: s.Namespace, Name: s.SecretName}
	var secret *corev1.Secret
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		secret = &corev1.Secret{}
		err := s.Client.Get(ctx, key, secret)
		switch {
		case apierrors.IsNotFound(err):
			secret = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.SecretName, Labels: map[string]string{
					"app.kubernetes.io/name":       "pipeline-operator",
					"app.kubernetes.io/component":  "webhook",
					"app.kubernetes.io/managed-by": "pipeline-operator",
				}},
				Type: corev1.SecretTypeTLS,
			}
			if secret.Data, err = s.generate(); err != nil {
				return err
			}
			err = s.Client.Create(ctx, secret)
			if apierrors.IsAlreadyExists(err) {
				// Another replica was first: use its certificate.
				return apierrors.NewConflict(corev1.Resource("secrets"), s.SecretName, err)
			}
			return err
		case err != nil:
			return err
		case s.valid(secret.Data):
			return nil
		}
		if secret.Data, err = s.generate(); err != nil {
			return err
		}
		return s.Client.Update(ctx, secret)
	})
	if err != nil {
		return nil, fmt.Errorf("webhook certificate secret %s: %w", key, err)
	}
	return secret, nil
}

// valid reports whether data holds a key pair and a CA that verifies it for the Service's
// DNS names for at least renewBefore.
func (s *SelfSigned) valid(data map[string][]byte) bool {
	pair, err := tls.X509KeyPair(data[CertKey], data[KeyKey])
	if err != nil {
		return false
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return false
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[CAKey]) {
		return false
	}
	at := s.now().Add(renewBefore)
	for _, name := range s.dnsNames() {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: at}); err != nil {
			return false
		}
	}
	return true
}

// generate makes a CA and a serving certificate signed by it.
func (s *SelfSigned) generate() (map[string][]byte, error) {
	now := s.now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	ca := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "pipeline-operator-webhook-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate serving key: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: s.dnsNames()[0]},
		DNSNames:     s.dnsNames(),
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode serving key: %w", err)
	}
	return map[string][]byte{
		CAKey:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		CertKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		KeyKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("read random serial number: %v", err))
	}
	return n
}

// injectCA sets caBundle on every webhook of the two configurations, when it differs.
func (s *SelfSigned) injectCA(ctx context.Context, ca []byte) error {
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	return errors.Join(
		s.patchCA(ctx, mutating, s.MutatingWebhookConfiguration, ca, func() (out []*admissionregistrationv1.WebhookClientConfig) {
			for i := range mutating.Webhooks {
				out = append(out, &mutating.Webhooks[i].ClientConfig)
			}
			return out
		}),
		s.patchCA(ctx, validating, s.ValidatingWebhookConfiguration, ca, func() (out []*admissionregistrationv1.WebhookClientConfig) {
			for i := range validating.Webhooks {
				out = append(out, &validating.Webhooks[i].ClientConfig)
			}
			return out
		}),
	)
}

// patchCA writes ca into the client configs of the webhook configuration obj named name (an
// empty name is skipped); configs lists them once obj has been read.
func (s *SelfSigned) patchCA(ctx context.Context, obj client.Object, name string, ca []byte,
	configs func() []*admissionregistrationv1.WebhookClientConfig) error {
	if name == "" {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				// Not registered (yet): nothing calls the webhook, so nothing needs the CA.
				return nil
			}
			return err
		}
		changed := false
		for _, cc := range configs() {
			if !bytes.Equal(cc.CABundle, ca) {
				cc.CABundle, changed = ca, true
			}
		}
		if !changed {
			return nil
		}
		return s.Client.Update(ctx, obj)
	})
	if err != nil {
		return fmt.Errorf("inject the webhook CA into %s: %w", name, err)
	}
	return nil
}
