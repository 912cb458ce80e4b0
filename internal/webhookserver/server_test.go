package webhookserver

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver/jsonshape"
)

// boundedServer starts a Server on loopback bounded by limits, with an echo of the body length
// at /validate and /convert; it returns its address and the number of requests the handlers saw.
func boundedServer(t *testing.T, limits Limits) (*Server, string, *atomic.Int64) {
	t.Helper()
	return boundedServerWith(t, limits, nil)
}

// boundedServerWith is boundedServer, with setup run on the server before it starts.
func boundedServerWith(t *testing.T, limits Limits, setup func(*Server) error) (*Server, string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cert := testCertificate(t)
	s, err := NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){
		func(c *tls.Config) {
			c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil }
		},
	}}, limits, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		n, _ := io.Copy(io.Discard, r.Body)
		_, _ = fmt.Fprint(w, n)
	})
	s.Register("/validate", echo)
	s.Register(ConversionPath, echo)
	if setup != nil {
		if err := setup(s); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); s.StartedChecker()(nil) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the webhook server does not start")
		}
	}
	return s, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &seen
}

func testCertificate(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func testClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a test server's own certificate
}

func post(t *testing.T, addr, path string, body io.Reader, length int64) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	// A connection of its own, closed once answered: the server serves only MaxConnections at
	// once, and a test that posts in a loop must not keep them all idle.
	c := testClient()
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func refused(s *Server, reason string) float64 {
	return testutil.ToFloat64(s.refused.WithLabelValues(reason))
}

func TestServerBoundsBodies(t *testing.T) {
	limits := DefaultLimits()
	limits.MaxAdmissionBytes, limits.MaxConversionBytes, limits.MaxBodyBytes = 100<<10, 1<<20, 2<<20
	s, addr, seen := boundedServer(t, limits)

	// Within the bounds, the webhook reads the whole body.
	if code, body := post(t, addr, "/validate", strings.NewReader(jsonString(100<<10)), 100<<10); code != 200 || body != "102400" {
		t.Fatalf("a body at the admission limit: %d %q", code, body)
	}
	if code, body := post(t, addr, ConversionPath, strings.NewReader(jsonString(1<<20)), -1); code != 200 || body != "1048576" {
		t.Fatalf("a body at the conversion limit, sent without a length: %d %q", code, body)
	}
	// Announced over the bound: refused before a byte is read.
	if code, body := post(t, addr, "/validate", strings.NewReader(jsonString(100<<10+1)), 100<<10+1); code != http.StatusRequestEntityTooLarge ||
		!strings.Contains(body, "over the limit of 102400 bytes") {
		t.Fatalf("an announced body over the admission limit: %d %q", code, body)
	}
	// Sent without a length and over the bound: refused once the bound is passed (the client
	// may see the answer or the connection closed under the rest of its body).
	if code, body := post(t, addr, ConversionPath, io.LimitReader(zeros{}, 64<<20), -1); code != http.StatusRequestEntityTooLarge && code != 0 {
		t.Fatalf("an unannounced body over the conversion limit: %d %q", code, body)
	}
	if got := refused(s, RefusedTooLarge); got != 2 {
		t.Errorf("refused too_large = %v, want 2", got)
	}
	if got := seen.Load(); got != 2 {
		t.Errorf("the webhooks saw %d requests, want only the 2 within bounds", got)
	}
}

// A client that sends part of a body and stops holds what it sent, until the read timeout
// answers it 408: others are refused 503 only while the budget is full, never left waiting.
func TestServerBodyBudgetAndSlowClients(t *testing.T) {
	limits := DefaultLimits()
	limits.MaxAdmissionBytes, limits.MaxConversionBytes, limits.MaxBodyBytes = 1<<20, 1<<20, 1<<20
	limits.ReadTimeout = 2 * time.Second
	s, addr, _ := boundedServer(t, limits)

	// Slow clients that trickle their bodies hold next to nothing: a request sent at once passes.
	for range 20 {
		slow := sendPartial(t, addr, 1<<20, 10)
		defer func() { _ = slow.Close() }()
	}
	if code, body := post(t, addr, "/validate", strings.NewReader("{}"), 2); code != 200 || body != "2" {
		t.Fatalf("a request beside 20 slow clients: %d %q", code, body)
	}

	// One that sent most of the budget and stopped fills it: the next is refused, not queued.
	hog := sendPartial(t, addr, 1<<20, 1<<20-64<<10)
	defer func() { _ = hog.Close() }()
	// Until the server has read what the hog sent, a request passes, and one read beside the
	// hog's bytes makes the hog's refused instead: wait until the budget holds them all (what
	// is left is less than the 64 KiB the hog did not send).
	for deadline := time.Now().Add(10 * time.Second); s.bodies.TryAcquire(64 << 10); {
		s.bodies.Release(64 << 10)
		if time.Now().After(deadline) {
			t.Fatal("the server does not read the stalled client's body")
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, body := 0, ""
	for deadline := time.Now().Add(10 * time.Second); code != http.StatusServiceUnavailable && time.Now().Before(deadline); {
		code, body = post(t, addr, "/validate", strings.NewReader(jsonString(128<<10)), 128<<10)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "retry") {
		t.Fatalf("a request while the budget is full: %d %q", code, body)
	}
	// The read timeout answers the hog 408 and gives its bytes back.
	status, err := bufio.NewReader(hog).ReadString('\n')
	if err != nil || !strings.Contains(status, "408") {
		t.Fatalf("the stalled client's answer: %q %v", status, err)
	}
	if code, _ := post(t, addr, "/validate", strings.NewReader(jsonString(128<<10)), 128<<10); code != 200 {
		t.Fatalf("a request after the stalled client was cut: %d", code)
	}
	if refused(s, RefusedBusy) != 1 || refused(s, RefusedSlow) < 1 {
		t.Errorf("refused busy = %v (want 1), slow = %v (want ≥ 1)", refused(s, RefusedBusy), refused(s, RefusedSlow))
	}
}

// sendPartial opens a connection, announces a body of length bytes to /validate and sends the
// first sent of them.
func sendPartial(t *testing.T, addr string, length, sent int) net.Conn {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test server's own certificate
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "POST /validate HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		addr, length, strings.Repeat("a", sent)); err != nil {
		t.Fatal(err)
	}
	return conn
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

func TestNewServerRefusesBoundsThatCannotServe(t *testing.T) {
	limits := DefaultLimits()
	limits.MaxBodyBytes = limits.MaxConversionBytes - 1
	if _, err := NewServer(webhook.Options{}, limits, nil, nil); err == nil || !strings.Contains(err.Error(), "below its largest request") {
		t.Errorf("a budget below the largest request: %v", err)
	}
	limits = DefaultLimits()
	limits.MaxInFlight = 0
	if _, err := NewServer(webhook.Options{}, limits, nil, nil); err == nil {
		t.Error("no request in flight: no error")
	}
}

// jsonString is a JSON document of n bytes: a string.
func jsonString(n int) string {
	return `"` + strings.Repeat("a", n-2) + `"`
}

// A body over its shape is refused 400 before the webhook sees it, with the bound and its
// path; one within it reaches the webhook, and its values are charged to the body budget while
// it is handled.
func TestServerRefusesBodiesOverTheirShape(t *testing.T) {
	limits := DefaultLimits()
	limits.Review = jsonshape.Limits{MaxDepth: 8, MaxItems: 16, MaxProperties: 16, MaxValues: 1000}
	limits.MaxConversionObjects = 3
	middle := "[" + strings.Repeat("[1,2,3,4],", 15) + "[1,2,3,4]]"
	many := `{"a":[` + strings.Repeat(middle+",", 15) + middle + "]}"
	s, addr, seen := boundedServer(t, limits)
	for _, tc := range []struct {
		path, body, refusal string
	}{
		{"/validate", `{"request":{"object":{"spec":{"steps":[` + strings.Repeat(`{},`, 16) + `{}]}}}}`, "request.object.spec.steps: more than 16 items"},
		{"/validate", `{"request":{"userInfo":{"groups":[` + strings.Repeat(`"g",`, 300) + `"g"]}}}`, "request.userInfo.groups: more than 256 items"},
		{"/validate", `[[[[[[[[[]]]]]]]]]`, "nested more than 8 deep"},
		{"/validate", many, "more than 1000 values"},
		{"/validate", `{"a":`, "unexpected EOF"},
		{ConversionPath, `{"request":{"objects":[{},{},{},{}]}}`, "request.objects: more than 3 items"},
	} {
		if code, body := post(t, addr, tc.path, strings.NewReader(tc.body), int64(len(tc.body))); code != http.StatusBadRequest || !strings.Contains(body, tc.refusal) {
			t.Errorf("%s %.40s…: %d %q, want 400 with %q", tc.path, tc.body, code, body, tc.refusal)
		}
	}
	if got := refused(s, RefusedShape); got != 6 {
		t.Errorf("refused shape = %v, want 6", got)
	}
	// A ConversionReview's values are not counted: its objects are.
	if code, body := post(t, addr, ConversionPath, strings.NewReader(many), -1); code != 200 {
		t.Errorf("a ConversionReview of many values: %d %q", code, body)
	}
	if seen.Load() != 1 {
		t.Errorf("the webhooks saw %d requests, want only the one within bounds", seen.Load())
	}
}

// The values of an AdmissionReview hold the body budget while it is handled: a review whose
// values cost more than the budget is answered 503, like a body that does not fit.
func TestServerChargesValues(t *testing.T) {
	limits := DefaultLimits()
	limits.MaxAdmissionBytes, limits.MaxConversionBytes, limits.MaxBodyBytes = 64<<10, 64<<10, 64<<10
	limits.ValueCost = 1 << 10
	s, addr, _ := boundedServer(t, limits)
	small := `{"a":[` + strings.Repeat(`1,`, 30) + `1]}`
	if code, body := post(t, addr, "/validate", strings.NewReader(small), -1); code != 200 {
		t.Fatalf("32 values: %d %q", code, body)
	}
	large := `{"a":[` + strings.Repeat(`1,`, 100) + `1]}`
	if code, body := post(t, addr, "/validate", strings.NewReader(large), -1); code != http.StatusServiceUnavailable {
		t.Fatalf("102 values of 1 KiB each in a budget of 64 KiB: %d %q", code, body)
	}
	if refused(s, RefusedBusy) != 1 {
		t.Errorf("refused busy = %v, want 1", refused(s, RefusedBusy))
	}
}

// Connections beyond MaxConnections wait, unserved, until others close.
func TestServerBoundsConnections(t *testing.T) {
	limits := DefaultLimits()
	limits.MaxConnections = 4
	_, addr, _ := boundedServer(t, limits)
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for range 4 {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test server's own certificate
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	d := &net.Dialer{Timeout: time.Second}
	fifth := tls.Client(mustDial(t, d, addr), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test server's own certificate
	defer func() { _ = fifth.Close() }()
	_ = fifth.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if err := fifth.Handshake(); err == nil {
		t.Fatal("a fifth connection was served beside four")
	}
	_ = held[0].Close()
	held = held[1:]
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test server's own certificate
	if err != nil {
		t.Fatalf("a connection once one closed: %v", err)
	}
	held = append(held, conn)
}

func mustDial(t *testing.T, d *net.Dialer, addr string) net.Conn {
	t.Helper()
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// Registered with a registry that holds controller-runtime's webhook metrics already (as its
// global one does), the server records into those.
func TestRequestMetricsJoinControllerRuntimes(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := newRequestMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := newRequestMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	h := second.instrument("/validate", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	h.ServeHTTP(httptestRecorder{}, &http.Request{Method: http.MethodPost})
	if got := testutil.ToFloat64(first.total.WithLabelValues("/validate", "400")); got != 1 {
		t.Errorf("requests by the first registration = %v, want the one the second recorded", got)
	}
}

// httptestRecorder is a ResponseWriter that keeps nothing.
type httptestRecorder struct{}

func (httptestRecorder) Header() http.Header         { return http.Header{} }
func (httptestRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (httptestRecorder) WriteHeader(int)             {}
