package admission

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// spellings are the operator's (internal/manager): v1beta1 requests get v1beta1's fields.
var spellings = map[string]Spelling{pipelinev1beta1.GroupVersion.Version: pipelinev1beta1.FieldSpelling{}}

// The webhook suite installs the CRD and the webhook configurations that `make manifests`
// generates into a real kube-apiserver, and serves the webhooks from a manager, so every
// request below goes through the full admission chain: mutating webhook, schema and CEL,
// validating webhook; and every request for the version not stored goes through the
// conversion webhook.

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	scheme    = testenv.Scheme()
	warned    = &warningRecorder{}
	cancel    context.CancelFunc
)

func TestIntegrationWebhooks(t *testing.T) {
	testenv.RequireAssets(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "Pipeline webhooks integration")
}

var _ = BeforeSuite(func() {
	testenv.ConfigureGinkgo(20 * time.Second)
	testEnv = testenv.New()
	testEnv.WebhookInstallOptions.Paths = []string{testenv.RepoPath("config", "webhook", "manifests.yaml")}
	// With both versions in its scheme, envtest points the CRD's conversion webhook at the
	// manager below.
	testEnv.Scheme = scheme
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())

	// Assertions use their own client, which records the admission warnings it receives.
	clientCfg := rest.CopyConfig(cfg)
	clientCfg.WarningHandlerWithContext = warned
	k8sClient, err = client.New(clientCfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	wio := &testEnv.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
		}),
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(SetupConversionWebhookWithManager(mgr)).To(Succeed())
	Expect(SetupPipelineWebhookWithManager(mgr, mgr.GetAPIReader(), operatorUser, spellings)).To(Succeed())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()

	Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(nil) }).Should(Succeed())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// deprecations counts the apiserver's deprecation warnings of v1beta1.
var deprecations atomic.Int64

// warningRecorder keeps the warnings the apiserver returned, in order, but the deprecation
// of v1beta1.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _, text string) {
	if strings.Contains(text, "v1beta1 Pipeline is deprecated") {
		deprecations.Add(1) // every v1beta1 request has it: the admission warnings are the others
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// take returns the warnings since the last call and forgets them.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// operatorUser is the operator's identity as the suite's validator knows it.
const operatorUser = "system:serviceaccount:pipeline-operator-system:pipeline-operator-controller-manager"
