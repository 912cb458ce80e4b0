// Package e2e holds the end-to-end tests: they run on the local control plane (make local-up:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok nodes), where
// Deployments really roll out, pods really get scheduled and garbage collection really happens.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	crdbases "github.com/ndsl-cn/pipeline-operator/config/crd"
	pipelineadmission "github.com/ndsl-cn/pipeline-operator/internal/admission"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/controller/pipeline"
	"github.com/ndsl-cn/pipeline-operator/internal/guard"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/webhookserver"
)

// The ServiceAccount `make deploy` creates for the manager.
const (
	operatorNamespace      = "pipeline-operator-system"
	operatorServiceAccount = "pipeline-operator-controller-manager"
)

var (
	scheme    = runtime.NewScheme()
	admin     client.WithWatch // the cluster admin, for the tests' own reads and writes
	adminCfg  *rest.Config     // admin's configuration, which tenants impersonate from
	clientset *kubernetes.Clientset
	forbidden refusals
	stopMgr   context.CancelFunc
)

// refusals records the requests the apiserver refused with 403 for want of permission (not
// those refused because their namespace is being deleted, which no RBAC can grant).
type refusals struct {
	count atomic.Int64
	mu    sync.Mutex
	calls []string
}

func (r *refusals) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			if strings.Contains(string(body), "because it is being terminated") {
				return resp, err
			}
			r.count.Add(1)
			r.mu.Lock()
			r.calls = append(r.calls, req.Method+" "+req.URL.Path)
			r.mu.Unlock()
		}
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func TestE2E(t *testing.T) {
	if os.Getenv("E2E_KUBECONFIG") == "" {
		t.Skip("E2E_KUBECONFIG is not set: run `make test-e2e`, which starts the local control plane and deploys the operator's manifests")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "pipeline-operator end-to-end")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(90 * time.Second)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(pipelinev1beta1.AddToScheme(scheme)).To(Succeed())
	Expect(pipelinev1.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())

	var err error
	adminCfg, err = clientcmd.BuildConfigFromFlags("", os.Getenv("E2E_KUBECONFIG"))
	Expect(err).NotTo(HaveOccurred())
	admin, err = client.NewWithWatch(adminCfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(adminCfg)
	Expect(err).NotTo(HaveOccurred())

	By("running the operator out of cluster with the credentials of its ServiceAccount")
	tr, err := clientset.CoreV1().ServiceAccounts(operatorNamespace).CreateToken(context.Background(), operatorServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred(), "the ServiceAccount from `make deploy` must exist")
	operatorCfg := rest.AnonymousClientConfig(adminCfg)
	operatorCfg.BearerToken = tr.Status.Token
	operatorCfg.Wrap(forbidden.wrap)

	By("keeping the webhook certificate with the ServiceAccount's permissions, as the deployed manager does")
	certs := &webhookserver.SelfSigned{
		Namespace:                      operatorNamespace,
		SecretName:                     "pipeline-operator-webhook-server-cert",
		ServiceName:                    "pipeline-operator-webhook-service",
		CertDir:                        GinkgoT().TempDir(),
		MutatingWebhookConfiguration:   mutatingWebhookConfiguration,
		ValidatingWebhookConfiguration: validatingWebhookConfiguration,
		GuardWebhookConfiguration:      guardWebhookConfiguration,
		ConversionCRD:                  pipelineCRD,
	}
	certMgr, err := ctrl.NewManager(operatorCfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	Expect(certs.SetupWithManager(context.Background(), certMgr)).To(Succeed())
	certCtx, stopCerts := context.WithCancel(context.Background())
	certsDone := make(chan error, 1)
	go func() { certsDone <- certMgr.Start(certCtx) }()
	Eventually(func() error { return certs.Ready(nil) }).Should(Succeed(), "certificate served and CA injected")
	// Stopped before the webhooks are pointed at this process below, which would otherwise get
	// the rotator's CA back.
	stopCerts()
	Expect(<-certsDone).To(Succeed())
	Expect(forbidden.count.Load()).To(BeZero(), describeRefusals())
	ca, err := os.ReadFile(filepath.Join(certs.CertDir, webhookserver.CAKey))
	Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{validatingWebhookConfiguration, guardWebhookConfiguration} {
		injected := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(admin.Get(context.Background(), client.ObjectKey{Name: name}, injected)).To(Succeed())
		for _, w := range injected.Webhooks {
			Expect(w.ClientConfig.CABundle).To(Equal(ca), "the CA is injected into webhook %s", w.Name)
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	Expect(admin.Get(context.Background(), client.ObjectKey{Name: pipelineCRD}, crd)).To(Succeed())
	Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).To(Equal(ca), "the CA is injected into the conversion webhook")

	By("serving the webhooks from this process: the deployed configurations are pointed at it")
	// The deployed manager's pod runs on a kwok node, where nothing really runs, so the
	// apiserver calls the webhooks of the operator in this process instead.
	local := &envtest.WebhookInstallOptions{}
	Expect(local.PrepWithoutInstalling()).To(Succeed())
	restoreWebhooks = pointWebhooksAt(local)

	// The manager's own webhook server, with its bounds and the Pipeline CRD's shape.
	pipelines, err := crdbases.Pipelines()
	Expect(err).NotTo(HaveOccurred())
	webhookServer, err := webhookserver.NewServer(webhook.Options{
		Host: local.LocalServingHost, Port: local.LocalServingPort, CertDir: local.LocalServingCertDir,
	}, webhookserver.DefaultLimits(), webhookserver.ObjectShape(pipelines), nil)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(operatorCfg, ctrl.Options{
		Scheme:        scheme,
		Metrics:       metricsserver.Options{BindAddress: "0"},
		Cache:         apply.CacheOptions(),
		WebhookServer: webhookServer,
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(pipelineadmission.SetupConversionWebhookWithManager(mgr)).To(Succeed())
	Expect(pipelineadmission.SetupPipelineWebhookWithManager(mgr, mgr.GetCache(),
		"system:serviceaccount:"+operatorNamespace+":pipeline-operator-controller-manager",
		map[string]pipelineadmission.Spelling{pipelinev1beta1.GroupVersion.Version: pipelinev1beta1.FieldSpelling{}})).To(Succeed())
	webhookServer.RegisterAdmission(guard.Path, nil, guard.NewWebhook(mgr))
	routerImage = deployedRouterImage(context.Background())
	Expect((&pipeline.Reconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Recorder:    mgr.GetEventRecorder("pipeline-operator"),
		RouterImage: routerImage,
	}).SetupWithManager(mgr)).To(Succeed())
	var ctx context.Context
	ctx, stopMgr = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if stopMgr != nil {
		stopMgr()
	}
	if restoreWebhooks != nil {
		restoreWebhooks()
	}
})

// The webhook configurations `make deploy` creates, and the CRD whose conversion webhook the
// manager serves.
const (
	mutatingWebhookConfiguration   = "pipeline-operator-mutating-webhook-configuration"
	validatingWebhookConfiguration = "pipeline-operator-validating-webhook-configuration"
	guardWebhookConfiguration      = "pipeline-operator-guard-webhook-configuration"
	pipelineCRD                    = "pipelines.distri-infer.ndsl.cn"
)

// restoreWebhooks puts the deployed webhook configurations back as they were.
var restoreWebhooks func()

// pointWebhooksAt makes the deployed webhook configurations and the CRD's conversion webhook
// call the webhook server described by local (host, port, CA), keeping their rules, paths and
// policies, and returns the undo.
func pointWebhooksAt(local *envtest.WebhookInstallOptions) func() {
	ctx := context.Background()
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	Expect(admin.Get(ctx, client.ObjectKey{Name: mutatingWebhookConfiguration}, mutating)).To(Succeed())
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	Expect(admin.Get(ctx, client.ObjectKey{Name: validatingWebhookConfiguration}, validating)).To(Succeed())
	guarding := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	Expect(admin.Get(ctx, client.ObjectKey{Name: guardWebhookConfiguration}, guarding)).To(Succeed())
	origMutating, origValidating, origGuarding := mutating.DeepCopy(), validating.DeepCopy(), guarding.DeepCopy()
	Expect(mutating.Webhooks).NotTo(BeEmpty())
	Expect(validating.Webhooks).NotTo(BeEmpty())
	Expect(guarding.Webhooks).NotTo(BeEmpty())

	redirect := func(cc *admissionregistrationv1.WebhookClientConfig) {
		Expect(cc.Service).NotTo(BeNil(), "the deployed webhooks call the webhook Service")
		Expect(cc.Service.Name).To(Equal("pipeline-operator-webhook-service"))
		Expect(cc.Service.Namespace).To(Equal(operatorNamespace))
		url := fmt.Sprintf("https://%s%s", net.JoinHostPort(local.LocalServingHost, fmt.Sprint(local.LocalServingPort)), *cc.Service.Path)
		cc.Service, cc.URL, cc.CABundle = nil, &url, local.LocalServingCAData
	}
	for i := range mutating.Webhooks {
		redirect(&mutating.Webhooks[i].ClientConfig)
	}
	for _, v := range []*admissionregistrationv1.ValidatingWebhookConfiguration{validating, guarding} {
		for i := range v.Webhooks {
			redirect(&v.Webhooks[i].ClientConfig)
		}
	}
	Expect(admin.Update(ctx, mutating)).To(Succeed())
	Expect(admin.Update(ctx, validating)).To(Succeed())
	Expect(admin.Update(ctx, guarding)).To(Succeed())
	crd := &apiextensionsv1.CustomResourceDefinition{}
	Expect(admin.Get(ctx, client.ObjectKey{Name: pipelineCRD}, crd)).To(Succeed())
	origConversion := crd.Spec.Conversion.DeepCopy()
	Expect(origConversion.Webhook).NotTo(BeNil(), "the deployed CRD converts through the webhook")
	cc := crd.Spec.Conversion.Webhook.ClientConfig
	Expect(cc.Service).NotTo(BeNil(), "the deployed conversion webhook calls the webhook Service")
	Expect(cc.Service.Name).To(Equal("pipeline-operator-webhook-service"))
	Expect(cc.Service.Namespace).To(Equal(operatorNamespace))
	url := fmt.Sprintf("https://%s%s", net.JoinHostPort(local.LocalServingHost, fmt.Sprint(local.LocalServingPort)), *cc.Service.Path)
	cc.Service, cc.URL, cc.CABundle = nil, &url, local.LocalServingCAData
	Expect(admin.Update(ctx, crd)).To(Succeed())
	return func() {
		for _, obj := range []client.Object{origMutating, origValidating, origGuarding} {
			obj.SetResourceVersion("")
			obj.SetManagedFields(nil)
			Expect(admin.Patch(ctx, obj, client.Merge)).To(Succeed())
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: pipelineCRD}, crd)).To(Succeed())
		crd.Spec.Conversion = origConversion
		Expect(admin.Update(ctx, crd)).To(Succeed())
	}
}

// describeRefusals lists the refused requests for a failure message.
func describeRefusals() string {
	forbidden.mu.Lock()
	defer forbidden.mu.Unlock()
	return fmt.Sprintf("%v", forbidden.calls)
}

// routerImage is the router image of the deployed manager, which this process's operator uses.
var routerImage string

// deployedRouterImage is the manager's RELATED_IMAGE_ROUTER in the Deployment `make deploy`
// created: the operator in this process runs routers from the image the deployed one would.
func deployedRouterImage(ctx context.Context) string {
	GinkgoHelper()
	d := &appsv1.Deployment{}
	Expect(admin.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "pipeline-operator-controller-manager"}, d)).To(Succeed())
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == resources.EnvRouterImage {
			Expect(e.Value).NotTo(BeEmpty())
			return e.Value
		}
	}
	Fail("the deployed manager has no " + resources.EnvRouterImage)
	return ""
}
