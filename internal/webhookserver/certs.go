// Package webhookserver is the manager's webhook server: the HTTP server that serves the conversion and
// admission webhooks within bounds (server.go), and its serving certificate.
//
// The certificate, when none is mounted (make deploy without cert-manager), is a self-signed CA and a serving
// certificate kept in a Secret shared by every replica, renewed before they expire, with the CA
// kept in the Pipeline webhook configurations and the Pipeline CRD's conversion webhook — all
// while the manager runs.
//
// The rotation is the cert rotator of github.com/open-policy-agent/cert-controller (pkg/rotator,
// the one OPA Gatekeeper runs). It keeps the Secret valid on a ticker and whenever the Secret
// changes, and puts the CA back into a webhook configuration whenever one is created, replaced or
// loses its caBundle. This package adds what the rotator leaves to its users:
//
//   - the Secret must exist before the rotator starts: SetupWithManager creates it (type
//     kubernetes.io/tls, empty) when missing, and it is created again if deleted while the
//     manager runs, which forces a new CA;
//   - the rotator only writes the Secret (its users mount it as a volume, which the kubelet
//     refreshes a minute or more later): here every replica watches the Secret and serves its
//     key pair from memory at once (GetCertificate), and writes it to CertDir, where the rotator
//     looks for it before it reports ready;
//   - readiness (Ready): a serving certificate is loaded and the CA has been injected;
//   - other Services (ExtraServices: the metrics Service) named by the serving certificate, so
//     that their endpoints serve it too (GetCertificate) and are verified with the same CA. The
//     rotator re-issues a certificate only when it does not name the webhook Service: a
//     certificate that lacks one of the other names (written by an earlier version, or before
//     a Service was added) is emptied here, and the rotator issues a new one from the same CA,
//     so the webhook configurations keep their caBundle.
//
// What the rotator implies:
//
//   - Secret: its name and the keys ca.crt, tls.crt and tls.key are those the manager has always
//     used; the rotator adds ca.key (the CA's private key, kept to sign the next serving
//     certificates). A Secret written by an earlier version has no ca.key, so the first start
//     with this one makes a new CA and serving certificate and injects the new CA.
//   - Certificates: RSA 2048; the serving certificate names <service>.<namespace>.svc and
//     <service>.<namespace>.svc.cluster.local for the webhook Service and each of
//     ExtraServices, the CA is named pipeline-operator-webhook-ca.
//   - Cache and RBAC: the rotator caches every Secret of the manager's namespace and every
//     mutating and validating webhook configuration and every CustomResourceDefinition of the
//     cluster (its cache takes no field selector), so it needs get, list and watch on those
//     (config/rbac/webhook_cert_role.yaml); writes stay limited to the one Secret, the two
//     configurations and the Pipeline CRD by name (create, which cannot be limited by name,
//     excepted). The watch of the Secret for serving is narrowed to
//     its name.
//   - Replicas: every replica runs the rotator and the watch, also without the leader Lease
//     (every replica serves webhooks). They agree through the Secret: a replica that renews it
//     writes with the version it read, so of two replicas renewing at once one is refused and
//     then reads the other's certificate; each replica serves what the Secret holds.
package webhookserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Keys of the certificate Secret and files of the certificate directory.
const (
	CAKey   = "ca.crt"
	CertKey = corev1.TLSCertKey
	KeyKey  = corev1.TLSPrivateKeyKey
)

// Defaults of the certificates' lifetimes and of how often they are checked.
const (
	DefaultCAValidity    = 10 * 365 * 24 * time.Hour
	DefaultCertValidity  = 365 * 24 * time.Hour
	DefaultRenewBefore   = 90 * 24 * time.Hour
	DefaultCheckInterval = 12 * time.Hour
)

// caName is the common name of the self-signed CA.
const caName = "pipeline-operator-webhook-ca"

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

// SelfSigned provisions and renews the webhook server's certificate without cert-manager. Its
// GetCertificate serves the certificate from the moment the Secret holds one; until then the
// TLS handshake fails, so the webhook server's readiness check fails too.
type SelfSigned struct {
	// Namespace is the manager's namespace; the Secret and the webhook Service live there.
	Namespace string
	// SecretName is the Secret holding the CA and the serving certificate.
	SecretName string
	// ServiceName is the webhook Service; the certificate is valid for its DNS names.
	ServiceName string
	// ExtraServices are other Services of Namespace whose DNS names the certificate carries too
	// (the metrics Service), so that their endpoints can serve it (GetCertificate) and be
	// verified with the Secret's ca.crt.
	ExtraServices []string
	// CertDir receives tls.crt, tls.key and ca.crt each time the certificate changes.
	CertDir string
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration (the Pipeline webhooks)
	// and GuardWebhookConfiguration (a ValidatingWebhookConfiguration too) get the CA as
	// caBundle; an empty name is skipped.
	MutatingWebhookConfiguration   string
	ValidatingWebhookConfiguration string
	GuardWebhookConfiguration      string
	// ConversionCRD is the CustomResourceDefinition whose conversion webhook gets the CA as
	// caBundle; an empty name is skipped.
	ConversionCRD string
	// CAValidity and CertValidity are the lifetimes of a new CA and serving certificate;
	// RenewBefore is how long before its expiry either is replaced, and CheckInterval how
	// often that is checked besides on changes of the Secret. Zero means the Default… value.
	CAValidity, CertValidity, RenewBefore, CheckInterval time.Duration
	// Name prefixes the names of the two controllers SetupWithManager adds (controller names
	// are unique in a process); "webhook-certificate" when empty.
	Name string

	serving  atomic.Pointer[tls.Certificate]
	injected chan struct{}
}

// SetupWithManager creates the Secret when it is missing and adds to mgr the rotator and the
// watch that serves the Secret's certificate. Call it before mgr starts.
func (s *SelfSigned) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	name := s.Name
	if name == "" {
		name = "webhook-certificate"
	}
	// The Secret is created empty, which draws the apiserver's warning that a kubernetes.io/tls
	// Secret holds no PEM data: expected until the rotator fills it, so not shown.
	quiet := rest.CopyConfig(mgr.GetConfig())
	quiet.WarningHandler, quiet.WarningHandlerWithContext = nil, rest.NoWarnings{}
	creator, err := client.New(quiet, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("create a client for the webhook certificate Secret: %w", err)
	}
	if err := s.createSecret(ctx, creator); err != nil {
		return err
	}

	var webhooks []rotator.WebhookInfo
	if s.MutatingWebhookConfiguration != "" {
		webhooks = append(webhooks, rotator.WebhookInfo{Name: s.MutatingWebhookConfiguration, Type: rotator.Mutating})
	}
	for _, name := range []string{s.ValidatingWebhookConfiguration, s.GuardWebhookConfiguration} {
		if name != "" {
			webhooks = append(webhooks, rotator.WebhookInfo{Name: name, Type: rotator.Validating})
		}
	}
	if s.ConversionCRD != "" {
		webhooks = append(webhooks, rotator.WebhookInfo{Name: s.ConversionCRD, Type: rotator.CRDConversion})
	}
	s.injected = make(chan struct{})
	names := s.DNSNames()
	err = rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:              types.NamespacedName{Namespace: s.Namespace, Name: s.SecretName},
		CertDir:                s.CertDir,
		CAName:                 caName,
		CAOrganization:         "pipeline-operator",
		DNSName:                names[0],
		ExtraDNSNames:          names[1:],
		IsReady:                s.injected,
		Webhooks:               webhooks,
		FieldOwner:             "pipeline-operator",
		RequireLeaderElection:  false,
		CaCertDuration:         orDefault(s.CAValidity, DefaultCAValidity),
		ServerCertDuration:     orDefault(s.CertValidity, DefaultCertValidity),
		LookaheadInterval:      orDefault(s.RenewBefore, DefaultRenewBefore),
		RotationCheckFrequency: orDefault(s.CheckInterval, DefaultCheckInterval),
		ControllerName:         name + "-rotator",
	})
	if err != nil {
		return fmt.Errorf("add the webhook certificate rotator: %w", err)
	}

	// The Secret, and only it, in a cache of its own.
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{s.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", s.SecretName),
		}},
	})
	if err != nil {
		return fmt.Errorf("create the cache of the webhook certificate Secret: %w", err)
	}
	if err := mgr.Add(everyReplica{secrets}); err != nil {
		return fmt.Errorf("add the cache of the webhook certificate Secret: %w", err)
	}
	r := &servingReconciler{certs: s, reader: secrets, writer: creator}
	err = ctrl.NewControllerManagedBy(mgr).
		Named(name + "-serving").
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		WatchesRawSource(source.Kind(secrets, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{})).
		Complete(r)
	if err != nil {
		return fmt.Errorf("add the webhook certificate watch: %w", err)
	}
	return nil
}

// everyReplica runs a cache on every replica. The manager runs a cache it is given only on the
// leader (a cache.Cache says nothing of leader election), so a replica that does not lead would
// never see the Secret, never serve its certificate and never be ready.
type everyReplica struct{ cache.Cache }

func (everyReplica) NeedLeaderElection() bool { return false }

// DNSNames are the names the serving certificate carries: <service>.<namespace>.svc and
// <service>.<namespace>.svc.cluster.local of the webhook Service first, then of each of
// ExtraServices.
func (s *SelfSigned) DNSNames() []string {
	names := make([]string, 0, 2*(1+len(s.ExtraServices)))
	for _, svc := range append([]string{s.ServiceName}, s.ExtraServices...) {
		name := svc + "." + s.Namespace + ".svc"
		names = append(names, name, name+".cluster.local")
	}
	return names
}

// missingNames are the DNSNames that the PEM certificate certPEM does not carry; none when
// certPEM holds no certificate (a Secret not filled yet).
func (s *SelfSigned) missingNames(certPEM []byte) []string {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return nil
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil
	}
	var missing []string
	for _, name := range s.DNSNames() {
		if cert.VerifyHostname(name) != nil {
			missing = append(missing, name)
		}
	}
	return missing
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// GetCertificate returns the serving certificate the Secret holds, for tls.Config.
func (s *SelfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.serving.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("the webhook serving certificate is not ready yet")
}

// Ready is a readiness check: it fails until a serving certificate is loaded and the CA has
// been injected into the webhook configurations.
func (s *SelfSigned) Ready(*http.Request) error {
	if s.serving.Load() == nil {
		return errors.New("no webhook serving certificate yet")
	}
	select {
	case <-s.injected:
		return nil
	default:
		return errors.New("the webhook CA is not injected yet")
	}
}

// createSecret creates the Secret, empty, unless it exists: the rotator fills it.
func (s *SelfSigned) createSecret(ctx context.Context, c client.Writer) error {
	err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.SecretName, Labels: map[string]string{
			"app.kubernetes.io/name":       "pipeline-operator",
			"app.kubernetes.io/component":  "webhook",
			"app.kubernetes.io/managed-by": "pipeline-operator",
		}},
		Type: corev1.SecretTypeTLS,
		// A kubernetes.io/tls Secret must have both keys, empty or not.
		Data: map[string][]byte{CertKey: {}, KeyKey: {}},
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the webhook certificate secret %s/%s: %w", s.Namespace, s.SecretName, err)
	}
	return nil
}

// load serves the key pair of data and writes data to CertDir, unless it is the one served
// already. Data without a usable key pair (a Secret not filled yet) changes nothing: the
// rotator fills it, and the watch brings it back.
func (s *SelfSigned) load(data map[string][]byte) (bool, error) {
	pair, err := tls.X509KeyPair(data[CertKey], data[KeyKey])
	if err != nil {
		return false, nil // not a key pair yet: nothing to serve, nothing failed
	}
	if cur := s.serving.Load(); cur != nil && bytes.Equal(cur.Certificate[0], pair.Certificate[0]) {
		return false, nil
	}
	if err := os.MkdirAll(s.CertDir, 0o700); err != nil {
		return false, fmt.Errorf("create webhook certificate directory: %w", err)
	}
	// The certificate last: its file is what the rotator waits for.
	for _, k := range []string{KeyKey, CAKey, CertKey} {
		if err := os.WriteFile(filepath.Join(s.CertDir, k), data[k], 0o600); err != nil {
			return false, fmt.Errorf("write webhook certificate %s: %w", k, err)
		}
	}
	s.serving.Store(&pair)
	return true, nil
}

// servingReconciler serves the certificate of the Secret, and creates the Secret again when it
// was deleted.
type servingReconciler struct {
	certs  *SelfSigned
	reader client.Reader
	writer client.Writer
}

// Reconcile serves the Secret's certificate, creates the Secret again when it is gone, and has
// a certificate that lacks a name re-issued.
func (r *servingReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	secret := &corev1.Secret{}
	err := r.reader.Get(ctx, req.NamespacedName, secret)
	if apierrors.IsNotFound(err) {
		// The last certificate is served until the rotator fills the new Secret.
		return ctrl.Result{}, r.certs.createSecret(ctx, r.writer)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read the webhook certificate secret: %w", err)
	}
	loaded, err := r.certs.load(secret.Data)
	if err != nil {
		return ctrl.Result{}, err
	}
	if loaded {
		ctrl.LoggerFrom(ctx).Info("serving the webhook certificate of the Secret", "resourceVersion", secret.ResourceVersion)
	}
	if missing := r.certs.missingNames(secret.Data[CertKey]); len(missing) > 0 {
		// Served until the new one comes: the webhook Service's names are in it.
		ctrl.LoggerFrom(ctx).Info("the Secret's certificate lacks names: asking for a new one from the same CA", "missing", missing)
		return r.reissue(ctx, secret)
	}
	return ctrl.Result{}, nil
}

// reissue empties the serving certificate and key of secret, as read, keeping its CA: the
// rotator, which watches the Secret, then issues a new serving certificate with every name
// from that CA. A Secret changed since it was read (another replica asked first, or the rotator
// renewed it) is left alone: the watch brings it.
func (r *servingReconciler) reissue(ctx context.Context, secret *corev1.Secret) (ctrl.Result, error) {
	secret = secret.DeepCopy()
	secret.Data[CertKey], secret.Data[KeyKey] = []byte{}, []byte{}
	err := r.writer.Update(ctx, secret)
	if apierrors.IsConflict(err) {
		return ctrl.Result{}, nil // the watch brings the newer Secret
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("empty the webhook certificate secret for a new certificate: %w", err)
	}
	return ctrl.Result{}, nil
}
