package manager

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ndsl-cn/pipeline-operator/config/samples"
	"github.com/ndsl-cn/pipeline-operator/internal/guard"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver"
)

// TestIntegrationWebhookServerBounds runs the manager with its conversion and admission webhooks
// in a real apiserver's path, and calls its webhook port as any pod of the cluster could: an
// oversized ConversionReview is refused without the manager's heap following it, and slow
// clients holding connections open do not stall the apiserver's admission calls.
func TestIntegrationWebhookServerBounds(t *testing.T) {
	testenv.RequireAssets(t)
	g := NewWithT(t)
	ctx, c, registry, addr := serveWebhooks(t, testenv.New(), WebhookOptions{})

	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-bounds-"}}
	g.Expect(c.Create(ctx, namespace)).To(Succeed())
	create := func(name string) error {
		// v1beta1: the apiserver calls the conversion webhook and both admission webhooks.
		p, err := samples.PipelineV1beta1(namespace.Name)
		if err != nil {
			return err
		}
		p.Name = name
		return c.Create(ctx, p)
	}
	// Until the manager's cache has synced, its webhooks may refuse.
	g.Eventually(func() error { return create("before") }).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	t.Run("an oversized ConversionReview is refused and the heap does not follow it", func(t *testing.T) {
		g := NewWithT(t)
		// 512 MiB of one JSON string, sent without a length: a decoder that reads it whole holds
		// all of it.
		const size = 512 << 20
		var code int
		var msg string
		grew := heapGrowth(func() {
			body := io.MultiReader(strings.NewReader(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"`),
				io.LimitReader(repeat('a'), size), strings.NewReader(`"}}`))
			code, msg = postInsecure(addr, webhookserver.ConversionPath, body)
		})
		g.Expect(code).To(Or(Equal(http.StatusRequestEntityTooLarge), Equal(0)), msg)
		t.Logf("heap in use grew by %d MiB at most while a body of %d MiB was sent", grew>>20, size>>20)
		g.Expect(grew).To(BeNumerically("<", 96<<20), "the manager's heap followed the body")
		g.Expect(refusedCount(registry, webhookserver.RefusedTooLarge)).To(BeNumerically(">=", 1))
	})

	// Forged reviews whose bytes are within the bounds but whose decoding, defaulting, checking or
	// converting would cost hundreds of MiB or minutes: each is refused before it is decoded, with
	// a 400 that names the bound, and the manager's heap grows by a fraction of what it did.
	for _, forged := range []struct {
		name, path string
		body       func() string
		refusal    string
	}{{
		name: "an AdmissionReview of 300,000 empty steps to the defaulting webhook",
		path: "/mutate-distri-infer-ndsl-cn-v1-pipeline",
		body: func() string {
			return admissionReview(`{"apiVersion":"distri-infer.ndsl.cn/v1","kind":"Pipeline","metadata":{"name":"p","namespace":"default"},`+
				`"spec":{"steps":[`+strings.Repeat(`{},`, 300_000)+`{}]}}`, `{"username":"u"}`)
		},
		refusal: "request.object.spec.steps: more than 32 items",
	}, {
		name: "an AdmissionReview of 30,000 faulty tolerations to the validating webhook",
		path: "/validate-distri-infer-ndsl-cn-v1-pipeline",
		body: func() string {
			return admissionReview(`{"apiVersion":"distri-infer.ndsl.cn/v1","kind":"Pipeline","metadata":{"name":"p","namespace":"default"},`+
				`"spec":{"steps":[{"name":"s","image":"i","model":"m","tolerations":[`+strings.Repeat(`{"operator":"Exists"},`, 30_000)+
				`{}]}]}}`, `{"username":"u"}`)
		},
		refusal: "request.object.spec.steps[0].tolerations: more than",
	}, {
		name: "a ConversionReview of 15 MiB of tiny objects",
		path: webhookserver.ConversionPath,
		body: func() string {
			one := `{"apiVersion":"distri-infer.ndsl.cn/v1","kind":"Pipeline"},`
			return `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u",` +
				`"desiredAPIVersion":"distri-infer.ndsl.cn/v1beta1","objects":[` + strings.Repeat(one, (15<<20)/len(one)) + `{}]}}`
		},
		refusal: "request.objects: more than 4096 items",
	}, {
		name: "an AdmissionReview whose requester carries 2 MiB of extra",
		path: "/validate-distri-infer-ndsl-cn-v1-pipeline",
		body: func() string {
			return admissionReview(`{"apiVersion":"distri-infer.ndsl.cn/v1","kind":"Pipeline","metadata":{"name":"p","namespace":"default"}}`,
				`{"username":"u","extra":{"x":["`+strings.Repeat("e", 2<<20)+`"]}}`)
		},
		refusal: "request.userInfo: more than 65536 bytes",
	}} {
		t.Run("refuses "+forged.name, func(t *testing.T) {
			g := NewWithT(t)
			body := forged.body()
			before := refusedCount(registry, webhookserver.RefusedShape)
			var code int
			var msg string
			var took time.Duration
			var rss int64
			grew := heapGrowth(func() {
				rss = rssGrowth(t, func() {
					start := time.Now()
					code, msg = postInsecure(addr, forged.path, strings.NewReader(body))
					took = time.Since(start)
				})
			})
			t.Logf("a body of %d KiB answered %d in %v; the heap grew by %d KiB at most, the resident set by %d KiB",
				len(body)>>10, code, took, grew>>10, rss>>10)
			g.Expect(code).To(Equal(http.StatusBadRequest), msg)
			g.Expect(msg).To(ContainSubstring(forged.refusal))
			g.Expect(refusedCount(registry, webhookserver.RefusedShape)).To(Equal(before + 1))
			// The review itself was held, and a decoder's buffer of its longest token: the bounds
			// are generous multiples, far below the hundreds of MiB the decoded review took.
			g.Expect(grew).To(BeNumerically("<", 4*int64(len(body))+32<<20), "the manager's heap followed the decoded review")
			g.Expect(rss).To(BeNumerically("<", 4*int64(len(body))+64<<20), "the process's resident set followed the decoded review")
			// Generous for a shared machine: decoding and checking these took 15 s to minutes.
			g.Expect(took).To(BeNumerically("<", 5*time.Second))
		})
	}

	t.Run("serves the guard webhook, its reviews bounded by the review's limits", func(t *testing.T) {
		g := NewWithT(t)
		service := func(ports string) string {
			return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",` +
				`"kind":{"group":"","version":"v1","kind":"Service"},"resource":{"group":"","version":"v1","resource":"services"},` +
				`"operation":"CREATE","userInfo":{"username":"system:serviceaccount:pipeline-operator-system:pipeline-operator-controller-manager"},` +
				`"object":{"apiVersion":"v1","kind":"Service","metadata":{"name":"db","namespace":"` + namespace.Name + `",` +
				`"ownerReferences":[{"apiVersion":"distri-infer.ndsl.cn/v1","kind":"Pipeline","name":"none","uid":"1","controller":true}]},` +
				`"spec":{"type":"LoadBalancer","ports":[` + ports + `]}}}}`
		}
		code, body := postInsecure(addr, guard.Path, strings.NewReader(service(`{"port":80}`)))
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(And(ContainSubstring(`"allowed":false`), ContainSubstring("Pipeline "+namespace.Name+"/none of uid 1, which does not exist")))
		ports := strings.TrimSuffix(strings.Repeat(`{"port":80},`, 2000), ",")
		code, body = postInsecure(addr, guard.Path, strings.NewReader(service(ports)))
		g.Expect(code).To(Equal(http.StatusBadRequest), body)
	})

	t.Run("says when the certificate it serves expires", func(t *testing.T) {
		g := NewWithT(t)
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate
		g.Expect(err).NotTo(HaveOccurred())
		served := conn.ConnectionState().PeerCertificates[0].NotAfter
		_ = conn.Close()
		families, err := registry.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		var expiry []float64
		for _, f := range families {
			if f.GetName() == webhookserver.MetricWebhookCertificateExpiry {
				for _, m := range f.GetMetric() {
					expiry = append(expiry, m.GetGauge().GetValue())
				}
			}
		}
		g.Expect(expiry).To(Equal([]float64{float64(served.Unix())}))
	})

	t.Run("records controller-runtime's webhook metrics for every path and answer", func(t *testing.T) {
		g := NewWithT(t)
		families, err := registry.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		requests := map[string]float64{}
		latencies := map[string]uint64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				switch f.GetName() {
				case webhookserver.MetricWebhookRequests:
					requests[labels["webhook"]+" "+labels["code"]] = m.GetCounter().GetValue()
				case webhookserver.MetricWebhookLatency:
					latencies[labels["webhook"]] = m.GetHistogram().GetSampleCount()
				}
			}
		}
		// The apiserver called all three for the v1beta1 Pipelines created above; the forged
		// reviews were answered 400.
		for _, path := range []string{"/mutate-distri-infer-ndsl-cn-v1-pipeline", "/validate-distri-infer-ndsl-cn-v1-pipeline", webhookserver.ConversionPath} {
			g.Expect(requests).To(HaveKeyWithValue(path+" 200", BeNumerically(">=", 1)), path)
			g.Expect(requests).To(HaveKeyWithValue(path+" 400", BeNumerically(">=", 1)), path)
			g.Expect(latencies).To(HaveKeyWithValue(path, BeNumerically(">=", 2)), path)
		}
	})

	t.Run("idle connections cost a bounded heap", func(t *testing.T) {
		g := NewWithT(t)
		// The connections are another process's, so that only the manager's side is measured.
		const n = 2000
		dialer := exec.Command(os.Args[0], "-test.run=^TestHelperIdleConnections$")
		dialer.Env = append(os.Environ(), idleDialEnv+"="+addr, idleCountEnv+"="+strconv.Itoa(n))
		stdin, err := dialer.StdinPipe()
		g.Expect(err).NotTo(HaveOccurred())
		stdout, err := dialer.StdoutPipe()
		g.Expect(err).NotTo(HaveOccurred())
		dialer.Stderr = os.Stderr
		var open int
		grew := heapGrowth(func() {
			g.Expect(dialer.Start()).To(Succeed())
			line, err := bufio.NewReader(stdout).ReadString('\n')
			g.Expect(err).NotTo(HaveOccurred())
			_, err = fmt.Sscanf(line, "open %d", &open)
			g.Expect(err).NotTo(HaveOccurred(), line)
		})
		_ = stdin.Close()
		g.Expect(dialer.Wait()).To(Succeed())
		t.Logf("%d of %d TLS connections were served at once; the heap grew by %d MiB at most", open, n, grew>>20)
		g.Expect(open).To(BeNumerically("<=", webhookserver.DefaultLimits().MaxConnections))
		// Served, each takes some tens of KiB (with the garbage of its handshake): 2,000 took
		// over 100 MiB.
		g.Expect(grew).To(BeNumerically("<", 32<<20), "the manager's heap followed the connections")
		// Once they are gone, the apiserver is served again.
		g.Eventually(func() error { return create("after-idle-connections") }).WithTimeout(30 * time.Second).
			WithPolling(200 * time.Millisecond).Should(Succeed())
	})

	t.Run("slow clients do not stall admission", func(t *testing.T) {
		g := NewWithT(t)
		// 100 connections that send their headers and a little of a large body, and wait; and
		// 100 that never finish their headers.
		var conns []net.Conn
		for i := range 200 {
			conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the server's limits matter here
			g.Expect(err).NotTo(HaveOccurred())
			conns = append(conns, conn)
			if i%2 == 0 {
				_, err = fmt.Fprintf(conn, "POST /validate-distri-infer-ndsl-cn-v1-pipeline HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n{\"kind\":", addr, 6<<20)
			} else {
				_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\n", webhookserver.ConversionPath, addr)
			}
			g.Expect(err).NotTo(HaveOccurred())
		}
		t.Cleanup(func() {
			for _, conn := range conns {
				_ = conn.Close()
			}
		})
		for i := range 10 {
			g.Expect(create(fmt.Sprintf("beside-slow-clients-%d", i))).To(Succeed())
		}
	})
}

// serveWebhooks starts env with the webhook configurations of config/webhook and a manager
// serving them, the conversion webhook included, with the options of w besides; it returns the
// manager's context, a client of env, the manager's metrics registry and its webhook address.
func serveWebhooks(t *testing.T, env *envtest.Environment, w WebhookOptions) (context.Context, client.Client, *prometheus.Registry, string) {
	t.Helper()
	g := NewWithT(t)
	env.WebhookInstallOptions.Paths = []string{testenv.RepoPath("config", "webhook", "manifests.yaml")}
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	wio := env.WebhookInstallOptions
	w.Enabled, w.ConversionCRD = true, "pipelines.distri-infer.ndsl.cn"
	w.Host, w.Port, w.CertDir = wio.LocalServingHost, wio.LocalServingPort, wio.LocalServingCertDir
	registry := prometheus.NewRegistry()
	mgr, err := New(cfg, Options{MetricsAddr: "0", ProbeAddr: "0", SeveralInProcess: true, MetricsRegistry: registry, Webhooks: w})
	g.Expect(err).NotTo(HaveOccurred())
	ctx := runManager(t, mgr)
	g.Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(nil) }).
		WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	return ctx, c, registry, net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
}

// heapGrowth runs f and returns by how much the heap in use grew at most while it ran, sampled
// every 5 ms.
func heapGrowth(f func()) int64 {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	<-sampled
	return int64(peak.Load()) - int64(before.HeapInuse)
}

// rssGrowth runs f and returns by how much the process's resident set grew at most while it ran:
// the kernel's peak (VmHWM), reset before f, less the resident set before it.
func rssGrowth(t *testing.T, f func()) int64 {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("reset the peak resident set: %v", err)
	}
	before := procStatus(t, "VmRSS:")
	f()
	return procStatus(t, "VmHWM:") - before
}

// procStatus is the field of /proc/self/status that starts with key, in bytes.
func procStatus(t *testing.T, key string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s %q: %v", key, v, err)
			}
			return kib << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}

// admissionReview is an AdmissionReview of object by the requester userInfo, as a caller of
// the port may forge one.
func admissionReview(object, userInfo string) string {
	return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",` +
		`"kind":{"group":"distri-infer.ndsl.cn","version":"v1","kind":"Pipeline"},` +
		`"resource":{"group":"distri-infer.ndsl.cn","version":"v1","resource":"pipelines"},` +
		`"operation":"CREATE","userInfo":` + userInfo + `,"object":` + object + `}}`
}

// The address and number of connections TestHelperIdleConnections opens.
const (
	idleDialEnv  = "WEBHOOK_IDLE_DIAL"
	idleCountEnv = "WEBHOOK_IDLE_COUNT"
)

// TestHelperIdleConnections is the process that opens idle TLS connections for
// TestIntegrationWebhookServerBounds: each handshake is given 2 s, the number that completed is
// printed as "open N", and they are held until standard input closes.
func TestHelperIdleConnections(t *testing.T) {
	addr := os.Getenv(idleDialEnv)
	if addr == "" {
		t.Skip("run by TestIntegrationWebhookServerBounds")
	}
	n, _ := strconv.Atoi(os.Getenv(idleCountEnv))
	conns := make(chan net.Conn, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			d := &net.Dialer{Timeout: 2 * time.Second, Deadline: time.Now().Add(2 * time.Second)}
			conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the server's limits matter here
			if err == nil {
				conns <- conn
			}
		})
	}
	wg.Wait()
	close(conns)
	fmt.Printf("open %d\n", len(conns))
	_, _ = io.Copy(io.Discard, os.Stdin)
	for conn := range conns {
		_ = conn.Close()
	}
}

type repeat byte

func (r repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// postInsecure posts body to path at addr without a length; a connection closed under the
// body counts as code 0 with its error.
func postInsecure(addr, path string, body io.Reader) (int, string) {
	req, err := http.NewRequest(http.MethodPost, "https://"+addr+path, body)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}).Do(req) //nolint:gosec // only the server's limits matter here
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func refusedCount(reg *prometheus.Registry, reason string) float64 {
	families, err := reg.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() != webhookserver.MetricWebhookRefused {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
