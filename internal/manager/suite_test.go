package manager

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ndsl-cn/pipeline-operator/internal/guard"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The manager suite runs against a real kube-apiserver and etcd (envtest), whose RBAC,
// TokenRequest, TokenReview, SubjectAccessReview and PodSecurity admission are the real ones.

var (
	testEnv    *envtest.Environment
	cfg        *rest.Config
	k8sClient  client.Client
	testScheme = testenv.Scheme()
)

func TestIntegration(t *testing.T) {
	testenv.RequireAssets(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "Manager integration")
}

var _ = BeforeSuite(func() {
	testenv.ConfigureGinkgo(20 * time.Second)
	testEnv = testenv.New()
	// The guard webhook of config/policy, as make deploy installs it, served below: every write
	// of a Service or volume by the operator's identity goes through it, as in a cluster.
	testEnv.WebhookInstallOptions.ValidatingWebhooks = []*admissionregistrationv1.ValidatingWebhookConfiguration{
		the[admissionregistrationv1.ValidatingWebhookConfiguration](deployManifests("default"), "ValidatingWebhookConfiguration", guardWebhook)}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: testScheme})
	Expect(err).NotTo(HaveOccurred())
	Expect(testenv.ServeWebhooks(context.Background(), testEnv, map[string]http.Handler{
		guard.Path: &admission.Webhook{Handler: &guard.Guard{Live: k8sClient}}})).To(Succeed())
})

// guardWebhook is the guard webhook's configuration as config/default names it.
const guardWebhook = "pipeline-operator-guard-webhook-configuration"

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// newNamespace creates a namespace of the test's own.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "manager-test-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// runManager starts mgr until the test ends, and returns the context it runs in; the test fails
// if the manager ends with an error.
func runManager(t *testing.T, mgr ctrl.Manager) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return ctx
}

// asServiceAccount is the suite's configuration acting as the ServiceAccount name of namespace,
// with the groups the apiserver gives ServiceAccounts.
func asServiceAccount(namespace, name string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	return c
}

// deployManifests is what `make deploy` applies from config/dir (testenv.DeployManifests).
func deployManifests(dir string) []*unstructured.Unstructured {
	GinkgoHelper()
	return testenv.DeployManifests(GinkgoT(), dir)
}

// the returns the one object of kind named name among objs, as T (testenv.ManifestObject).
func the[T any](objs []*unstructured.Unstructured, kind, name string) *T {
	GinkgoHelper()
	return testenv.ManifestObject[T](GinkgoT(), objs, kind, name)
}
