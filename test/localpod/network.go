package localpod

import (
	"bufio"
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
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EgressProxy is kube-apiserver's way into the cluster network (its "cluster" egress
// selection, see hack/localcluster -egress-socket): an HTTP CONNECT proxy on a Unix socket.
// Service addresses are not reachable on this machine and are never dialled: a CONNECT to a
// Service's address and port leads to the loopback port of the local process that plays the
// pods the Service selects (OperatorPod), and anything else is refused. The apiserver calls
// the operator's webhook Service exactly as it is registered (its CA, its name in the TLS
// handshake); only the last hop differs.
type EgressProxy struct {
	admin    client.Client
	listener net.Listener
	backends []*OperatorPod

	mu      sync.Mutex
	tunnels map[string]int // by namespace/name:port of the Service
	refused []string
}

// StartEgressProxy serves the proxy on the Unix socket (replacing a file there) for the processes
// that play backends.
func StartEgressProxy(admin client.Client, socket string, backends ...*OperatorPod) (*EgressProxy, error) {
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", socket, err)
	}
	e := &EgressProxy{admin: admin, listener: l, backends: backends, tunnels: map[string]int{}}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go e.serve(conn)
		}
	}()
	return e, nil
}

// Close stops accepting tunnels.
func (e *EgressProxy) Close() { _ = e.listener.Close() }

func (e *EgressProxy) serve(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	req, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		_, _ = io.WriteString(conn, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	service, local, err := e.resolve(req.Context(), req.Host)
	if err != nil {
		e.mu.Lock()
		e.refused = append(e.refused, fmt.Sprintf("%s: %v", req.Host, err))
		e.mu.Unlock()
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	backend, err := net.DialTimeout("tcp", local, 5*time.Second)
	if err != nil {
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 503 Service Unavailable\r\n\r\n")
		return
	}
	defer func() { _ = backend.Close() }()
	e.mu.Lock()
	e.tunnels[service]++
	e.mu.Unlock()
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(backend, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, backend); done <- struct{}{} }()
	<-done
}

// resolve maps a Service address and port to the loopback address of the local process that
// serves it, and names the Service.
func (e *EgressProxy) resolve(ctx context.Context, hostPort string) (string, string, error) {
	host, portText, err := net.SplitHostPort(hostPort)
	if err != nil {
		return "", "", err
	}
	var port int32
	if _, err := fmt.Sscan(portText, &port); err != nil {
		return "", "", err
	}
	services := &corev1.ServiceList{}
	if err := e.admin.List(ctx, services); err != nil {
		return "", "", err
	}
	for i := range services.Items {
		svc := &services.Items[i]
		if svc.Spec.ClusterIP != host {
			continue
		}
		name := fmt.Sprintf("%s/%s:%d", svc.Namespace, svc.Name, port)
		for _, b := range e.backends {
			if local, ok := b.serves(svc, port); ok {
				return name, local, nil
			}
		}
		return "", "", fmt.Errorf("no local process serves Service %s", name)
	}
	return "", "", errors.New("no Service has this address")
}

// TunnelsTo is how many connections the apiserver made to the Service namespace/name:port.
func (e *EgressProxy) TunnelsTo(service string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tunnels[service]
}

// Refusals lists the CONNECT requests refused, each with the reason.
func (e *EgressProxy) Refusals() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.refused...)
}

// request is one request the operator sent to the apiserver.
type request struct {
	method, path string
	code         int
	body         string // of a refusal
}

// APIFront is a loopback HTTPS front of the apiserver through which the operator talks to it:
// it records every request the operator sends, so that writes are counted on the wire.
type APIFront struct {
	listener net.Listener
	server   *http.Server
	caPEM    []byte

	mu       sync.Mutex
	requests []request
}

// StartAPIFront serves a front of the apiserver admin talks to on a loopback port, with a
// certificate of its own.
func StartAPIFront(admin *rest.Config) (*APIFront, error) {
	target, err := url.Parse(admin.Host)
	if err != nil {
		return nil, err
	}
	// Only the apiserver's CA: the operator's own token passes through.
	transport, err := rest.TransportFor(&rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}})
	if err != nil {
		return nil, err
	}
	cert, caPEM, err := selfSignedLoopback()
	if err != nil {
		return nil, err
	}
	f := &APIFront{caPEM: caPEM}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	proxy.FlushInterval = -1
	proxy.ModifyResponse = func(resp *http.Response) error {
		r := request{method: resp.Request.Method, path: resp.Request.URL.Path, code: resp.StatusCode}
		if resp.StatusCode == http.StatusForbidden {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			r.body = string(body)
		}
		f.mu.Lock()
		f.requests = append(f.requests, r)
		f.mu.Unlock()
		return nil
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	f.listener, f.server = l, &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.server.Serve(l) }()
	return f, nil
}

// URL is the front's address.
func (f *APIFront) URL() string { return "https://" + f.listener.Addr().String() }

// Close stops the front.
func (f *APIFront) Close() { _ = f.server.Close() }

// Mark is the number of requests so far, for writes.
func (f *APIFront) Mark() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// Writes lists the write requests (not GET, LIST or WATCH) since mark whose path has one of the
// prefixes.
func (f *APIFront) Writes(mark int, prefixes ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests[mark:] {
		if r.method == http.MethodGet {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(r.path, p) {
				out = append(out, r.method+" "+r.path)
				break
			}
		}
	}
	return out
}

// Summary counts the requests and the writes the operator sent.
func (f *APIFront) Summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	writes := 0
	for _, r := range f.requests {
		if r.method != http.MethodGet {
			writes++
		}
	}
	return fmt.Sprintf("%d requests, %d of them writes", len(f.requests), writes)
}

// Refusals lists the requests refused for want of permission (403), except those refused
// because their namespace is being deleted, which no RBAC can grant.
func (f *APIFront) Refusals() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.requests {
		if r.code == http.StatusForbidden && !strings.Contains(r.body, "because it is being terminated") {
			out = append(out, r.method+" "+r.path)
		}
	}
	return out
}

// selfSignedLoopback makes a certificate for 127.0.0.1 and returns it with its PEM.
func selfSignedLoopback() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "apiserver front"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}

// FreePort returns a loopback TCP port nothing listens on now.
func FreePort() int {
	ginkgo.GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ginkgo.Fail(err.Error())
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
