package pipeline

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ndsl-cn/pipeline-operator/internal/metrics"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The integration suite runs the reconciler in a manager against a real kube-apiserver and
// etcd (envtest). No built-in controller runs there: tests play the part of the deployment
// controller and the volume binder by writing child statuses themselves.

var (
	testEnv    *envtest.Environment
	cfg        *rest.Config
	k8sClient  client.Client // non-cached: assertions see the apiserver, not a cache
	testScheme = testenv.Scheme()
	cancelMgr  context.CancelFunc
	mgrCache   cache.Cache // the manager's cache, to check what it holds
	metricsReg *prometheus.Registry
)

// sampleNodes are the nodes the sample Pipeline is pinned to.
var sampleNodes = []string{"xx-test-node236", "xx-test-node239"}

func TestIntegration(t *testing.T) {
	testenv.RequireAssets(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "Pipeline controller integration")
}

var _ = BeforeSuite(func() {
	testenv.ConfigureGinkgo(20 * time.Second)
	testEnv = testenv.New()
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	Expect(testenv.ServeConversion(context.Background(), testEnv)).To(Succeed())

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
	metrics, err := metrics.New(metricsReg, mgr.GetCache())
	Expect(err).NotTo(HaveOccurred())
	Expect((&Reconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Recorder:    mgr.GetEventRecorder("pipeline-operator"),
		Metrics:     metrics,
		RouterImage: testenv.RouterImage,
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

// createNode creates a node that reports Ready, as a node with a running kubelet does.
func createNode(name string) {
	GinkgoHelper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	Expect(k8sClient.Create(context.Background(), node)).To(Succeed())
	setNodeReady(context.Background(), name, corev1.ConditionTrue, time.Now().Add(-time.Hour))
}

// setNodeReady plays the kubelet and the node lifecycle controller: node's Ready condition
// becomes status, as of since.
func setNodeReady(ctx context.Context, name string, status corev1.ConditionStatus, since time.Time) {
	GinkgoHelper()
	Eventually(func() error {
		node := &corev1.Node{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test" + string(status),
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.NewTime(since)}}
		return k8sClient.Status().Update(ctx, node)
	}).Should(Succeed())
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
