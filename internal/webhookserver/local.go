package webhookserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LoopbackHost is where a LocalConversion serves: the apiserver of a local control plane
// reaches it there, and nothing else can.
const LoopbackHost = "127.0.0.1"

// LocalConversion serves a CRD's conversion webhook from a manager that runs outside the
// cluster (make run, make demo), where no Service leads to it: the webhook server listens on
// LoopbackHost with a certificate made at start and kept in memory, and Start points the CRD's
// conversion webhook at that address with the certificate as its CA. The apiserver must run on
// the same machine. Stopping the manager leaves the CRD pointing at an address nobody serves
// until the next start: objects stored in the other version cannot be read meanwhile.
type LocalConversion struct {
	// CRD is the CustomResourceDefinition whose conversion webhook is pointed here.
	CRD string
	// Port is the webhook server's port.
	Port int
	// Writer patches the CRD.
	Writer client.Writer

	cert  tls.Certificate
	caPEM []byte
}

// NewLocalConversion makes the certificate, valid for LoopbackHost and localhost for a year.
func NewLocalConversion(crd string, port int, w client.Writer, now time.Time) (*LocalConversion, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the conversion webhook key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate the conversion webhook certificate serial: %w", err)
	}
	// Self-signed and its own CA: the caBundle is the certificate itself.
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "pipeline-operator-local-conversion", Organization: []string{"pipeline-operator"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP(LoopbackHost)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create the conversion webhook certificate: %w", err)
	}
	return &LocalConversion{
		CRD:    crd,
		Port:   port,
		Writer: w,
		cert:   tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		caPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

// GetCertificate serves the certificate, for tls.Config.
func (l *LocalConversion) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return &l.cert, nil
}

// CABundle is the PEM the apiserver verifies the webhook server with.
func (l *LocalConversion) CABundle() []byte { return l.caPEM }

// URL is the conversion webhook's address.
func (l *LocalConversion) URL() string {
	return "https://" + net.JoinHostPort(LoopbackHost, strconv.Itoa(l.Port)) + "/convert"
}

// Start points the CRD's conversion webhook at URL with CABundle (a JSON merge patch that also
// removes the Service the deployed manifests name), and returns: a manager Runnable.
func (l *LocalConversion) Start(ctx context.Context) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"conversionReviewVersions": []string{"v1"},
			"clientConfig":             map[string]any{"url": l.URL(), "caBundle": l.caPEM, "service": nil},
		},
	}}})
	if err != nil {
		return fmt.Errorf("encode the conversion webhook patch: %w", err)
	}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(l.CRD)
	if err := l.Writer.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("point the conversion webhook of CRD %s at %s: %w", l.CRD, l.URL(), err)
	}
	return nil
}

// NeedLeaderElection is false: every manager started outside the cluster serves the conversion
// it points the CRD at.
func (l *LocalConversion) NeedLeaderElection() bool { return false }
