package controller

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// The integration suite runs the reconciler in a manager against a real kube-apiserver and
// etcd (envtest). No built-in controller runs there: tests play the part of the deployment
// controller and the volume binder by writing child statuses themselves.

var (
	testEnv    *envtest.Environment
	cfg        *rest.Config
	k8sClient  client.Client // non-cached: assertions see the apiserver, not a cache
	testScheme = runtime.NewScheme()
	cancelMgr  context.CancelFunc
	mgrCache   cache.Cache // the manager's cache, to check what it holds
	metricsReg *prometheus.Registry
)

// sampleNodes are the nodes the sample Pipeline is pinned to.
var sampleNodes = []string{"xx-test-node236", "xx-test-node239"}

func TestIntegration(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: run `make test-integration`, which builds kube-apiserver and etcd")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Pipeline controller integration")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(time.Second)
	SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)

	Expect(clientgoscheme.AddToScheme(testScheme)).To(Succeed())
	Expect(pipelinev1beta1.AddToScheme(testScheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(testScheme)).To(Succeed())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())

	k8sClient, err = client.New(cfg, client.Options{Scheme: testScheme})
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  testScheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   suiteCacheOptions(),
	})
	Expect(err).NotTo(HaveOccurred())
	mgrCache = mgr.GetCache()
	metricsReg = prometheus.NewRegistry()
	metrics, err := NewMetrics(metricsReg, mgr.GetCache())
	Expect(err).NotTo(HaveOccurred())
	Expect((&PipelineReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("pipeline-operator"),
		Metrics:   metrics,
	}).SetupWithManager(mgr)).To(Succeed())

	var ctx context.Context
	ctx, cancelMgr = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()

	for _, n := range sampleNodes {
		createNode(n)
	}
})

var _ = AfterSuite(func() {
	if cancelMgr != nil {
		cancelMgr()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

func createNode(name string) {
	GinkgoHelper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	Expect(k8sClient.Create(context.Background(), node)).To(Succeed())
}

// writeCounter counts the requests of a client that change something.
type writeCounter struct{ writes atomic.Int64 }

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.writes.Add(1)
		}
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
