package client_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
	"github.com/ndsl-cn/pipeline-operator/pkg/client/clientset/versioned"
)

// The suite exercises the generated client against a real kube-apiserver and etcd
// (envtest) with the Pipeline CRD installed. No operator runs: what the tests read back is
// what the apiserver stored.

var (
	testEnv   *envtest.Environment
	clientset versioned.Interface
	kube      kubernetes.Interface
)

func TestIntegrationClient(t *testing.T) {
	testenv.RequireAssets(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "Generated Pipeline client integration")
}

var _ = BeforeSuite(func() {
	testenv.ConfigureGinkgo(20 * time.Second)
	testEnv = testenv.New()
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	Expect(testenv.ServeConversion(context.Background(), testEnv)).To(Succeed())

	clientset, err = versioned.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	kube, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// newNamespace creates a namespace of its own for one test.
func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns, err := kube.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "client-"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return ns.Name
}
