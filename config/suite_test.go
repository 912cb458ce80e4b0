package config

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The deploy configuration's suite builds the kustomizations of config/ as `make deploy` does
// and checks what they hold, against a real kube-apiserver and etcd (envtest) where an object
// must be admitted: its dry runs meet the apiserver's own validation and PodSecurity admission.

var (
	testEnv   *envtest.Environment
	k8sClient client.Client
)

func TestIntegration(t *testing.T) {
	testenv.RequireAssets(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "Deploy configuration integration")
}

var _ = BeforeSuite(func() {
	testenv.ConfigureGinkgo(20 * time.Second)
	testEnv = testenv.New()
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

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
