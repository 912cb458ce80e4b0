package manager

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ndsl-cn/pipeline-operator/config/samples"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
	pipelinewebhook "github.com/ndsl-cn/pipeline-operator/internal/webhook"
)

// TestIntegrationWebhookServerBounds runs the manager with its conversion and admission webhooks
// in a real apiserver's path, and calls its webhook port as any pod of the cluster could: an
// oversized ConversionReview is refused without the manager's heap following it, and slow
// clients holding connections open do not stall the apiserver's admission calls.
func TestIntegrationWebhookServerBounds(t *testing.T) {
	testenv.RequireAssets(t)
	g := NewWithT(t)
	env := testenv.New()
	env.WebhookInstallOptions.Paths = []string{testenv.RepoPath("config", "webhook", "manifests.yaml")}
	cfg, err := env.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	wio := env.WebhookInstallOptions
	registry := prometheus.NewRegistry()
	mgr, err := New(cfg, Options{MetricsAddr: "0", ProbeAddr: "0", SeveralInProcess: true, MetricsRegistry: registry, Webhooks: WebhookOptions{
		Enabled: true, ConversionCRD: "pipelines.distri-infer.ndsl.cn",
		Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
	}})
	g.Expect(err).NotTo(HaveOccurred())
	ctx := runManager(t, mgr)
	g.Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(nil) }).
		WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))

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
		// 512 MiB of one JSON string, sent without a length: a decoder that reads it whole holds
		// all of it.
		const size = 512 << 20
		body := io.MultiReader(strings.NewReader(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"`),
			io.LimitReader(repeat('a'), size), strings.NewReader(`"}}`))
		code, msg := postInsecure(addr, pipelinewebhook.ConversionPath, body)
		close(stop)
		<-sampled
		g.Expect(code).To(Or(Equal(http.StatusRequestEntityTooLarge), Equal(0)), msg)
		grew := int64(peak.Load()) - int64(before.HeapInuse)
		t.Logf("heap in use grew by %d MiB at most while a body of %d MiB was sent", grew>>20, size>>20)
		g.Expect(grew).To(BeNumerically("<", 96<<20), "the manager's heap followed the body")
		g.Expect(refusedCount(registry, pipelinewebhook.RefusedTooLarge)).To(BeNumerically(">=", 1))
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
				_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\n", pipelinewebhook.ConversionPath, addr)
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
		if f.GetName() != pipelinewebhook.MetricWebhookRefused {
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
