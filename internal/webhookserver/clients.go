package webhookserver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
)

// clients are the client certificates admission requests must present: issued by one of cas
// and, when names is not empty, naming one of them (as common name or DNS name).
type clients struct {
	cas   *x509.CertPool
	names []string
}

// RequireClients makes the admission paths answer only callers that present a client
// certificate issued by a CA of the PEM file caFile and, when names are given, naming one of
// them: the kube-apiserver, once its admission configuration gives it that certificate for the
// webhooks (docs/security.md). Other callers are refused 403 before their body is read. The
// conversion path is left open: the apiserver presents no client certificate to conversion
// webhooks. Call it before Start; the CA file is read once.
func (s *Server) RequireClients(caFile string, names []string) error {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("read the webhook clients' CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("the webhook clients' CA %s holds no PEM certificate", caFile)
	}
	s.clients = &clients{cas: pool, names: slices.Clone(names)}
	return nil
}

// check says why the connection state st does not carry a client certificate c asks for.
func (c *clients) check(st *tls.ConnectionState) error {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return errors.New("a client certificate of the kube-apiserver is required (--webhook-client-ca-file)")
	}
	if len(c.names) == 0 {
		return nil
	}
	leaf := st.VerifiedChains[0][0]
	if slices.Contains(c.names, leaf.Subject.CommonName) || slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return slices.Contains(c.names, n) }) {
		return nil
	}
	return fmt.Errorf("client certificate %q is not one of the webhook's clients (--webhook-client-names)", leaf.Subject.CommonName)
}
