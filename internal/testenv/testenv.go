// Package testenv is what the integration suites share: the real kube-apiserver and etcd that
// `make test-integration` builds (envtest), with the Pipeline CRD installed, and the suites'
// common settings. Only tests import it.
package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// RequireAssets skips t unless KUBEBUILDER_ASSETS names the kube-apiserver and etcd binaries.
func RequireAssets(t testing.TB) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: run `make test-integration`, which builds kube-apiserver and etcd")
	}
}

// RepoPath is a path inside the repository, whatever package the test runs in.
func RepoPath(elem ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", ".."}, elem...)...)
}

// New is an apiserver with the CRDs of config/crd/bases installed at start. The Pipeline CRD
// stores v1 and converts to and from v1beta1 through the webhook at the local address of the
// environment's WebhookInstallOptions (envtest points the CRD there, since Scheme holds both
// versions): after Start, serve it there with ServeConversion, or from a manager's webhook
// server on that address.
func New() *envtest.Environment {
	return &envtest.Environment{
		CRDDirectoryPaths:     []string{RepoPath("config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}
}

// ServeConversion serves the Pipeline conversion webhook where env (started) points the CRD,
// until ctx ends, and returns once it answers.
func ServeConversion(ctx context.Context, env *envtest.Environment) error {
	return ServeWebhooks(ctx, env, nil)
}

// ServeWebhooks serves, where env (started) points its webhooks, the Pipeline conversion webhook
// and hooks by path, until ctx ends, and returns once they answer.
func ServeWebhooks(ctx context.Context, env *envtest.Environment, hooks map[string]http.Handler) error {
	o := env.WebhookInstallOptions
	server := webhook.NewServer(webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir})
	server.Register("/convert", conversion.NewWebhookHandler(Scheme(), conversion.NewRegistry()))
	for path, hook := range hooks {
		server.Register(path, hook)
	}
	done := make(chan error, 1)
	go func() { done <- server.Start(ctx) }()
	addr := net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort))
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := server.StartedChecker()(nil)
		if err == nil {
			return nil
		}
		select {
		case err := <-done:
			return fmt.Errorf("serve the conversion webhook at %s: %w", addr, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the conversion webhook at %s does not answer: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PipelineCRD is the Pipeline CRD as make manifests generates it (config/crd/bases).
func PipelineCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(RepoPath("config", "crd", "bases", "distri-infer.ndsl.cn_pipelines.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// Scheme knows the built-in kinds, CustomResourceDefinitions and both versions of Pipelines.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(pipelinev1beta1.AddToScheme(s))
	utilruntime.Must(pipelinev1.AddToScheme(s))
	return s
}

// ConfigureGinkgo sends the logs to Ginkgo's writer and sets the suites' polling: 100 ms,
// up to eventually.
func ConfigureGinkgo(eventually time.Duration) {
	logf.SetLogger(zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true)))
	gomega.SetDefaultEventuallyTimeout(eventually)
	gomega.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	gomega.SetDefaultConsistentlyDuration(time.Second)
	gomega.SetDefaultConsistentlyPollingInterval(100 * time.Millisecond)
}
