// Package olm holds the Operator Lifecycle Manager end-to-end test (make test-olm): on a local
// control plane of its own, OLM's olm-operator and catalog-operator (built from the Go module
// proxy) install the operator from a file-based catalog through a Subscription, upgrade it to
// the next release once no Pipeline rolls out, and uninstall it.
//
// No container runs here: kwok plays every pod in the cluster, and this test runs, on loopback,
// the processes those pods would run — opm serving the catalog (the CatalogSource points at its
// address), and the manager of the Deployment OLM makes (localpod.OperatorPod). kube-apiserver
// reaches the webhook Service OLM registers through localpod.EgressProxy.
package olm

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/test/localpod"
)

const (
	packageName = "pipeline-operator"
	// olmNamespace holds OLM's global catalogs; operatorNamespace the operator, with an
	// OperatorGroup for all namespaces (the only install mode of the bundle).
	olmNamespace      = "olm"
	operatorNamespace = "operators"
	// operatorDeployment is the Deployment of the bundle's ClusterServiceVersion; OLM names the
	// webhook Service after it.
	operatorDeployment = "pipeline-operator-controller-manager"
	webhookService     = operatorDeployment + "-service"
	// envOperatorConditionName is the variable OLM sets on the operator's Deployment.
	envOperatorConditionName = "OPERATOR_CONDITION_NAME"
)

var (
	scheme    = runtime.NewScheme()
	admin     client.WithWatch
	clientset *kubernetes.Clientset

	// From make test-olm.
	opm, logDir, channel string
	// previous is the release before this one (v1beta1 alone), built from its commit by make
	// test-olm; current the bundle of bundle/; next the same bundle as the next release, with
	// its catalog (hack/rehearse-release.sh makes both).
	previous, current, next     release
	currentCatalog, nextCatalog string

	olmProcesses   []*localpod.Process
	catalogServers []*localpod.Process
	front          *localpod.APIFront
	egress         *localpod.EgressProxy
	pod            *localpod.OperatorPod
	timings        []string
	suiteStart     time.Time
)

// release is a bundle directory, its ClusterServiceVersion's name and version, and the image
// of its manager.
type release struct {
	dir, csv, version, image string
}

func TestOLM(t *testing.T) {
	if os.Getenv("OLM_KUBECONFIG") == "" {
		t.Skip("OLM_KUBECONFIG is not set: run `make test-olm`, which builds OLM and starts a local control plane for it")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "pipeline-operator under Operator Lifecycle Manager")
}

func readRelease(dir string) release {
	GinkgoHelper()
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "*.clusterserviceversion.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(files).To(HaveLen(1))
	data, err := os.ReadFile(files[0])
	Expect(err).NotTo(HaveOccurred())
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	Expect(yaml.Unmarshal(data, csv)).To(Succeed())
	deployments := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	Expect(deployments).To(HaveLen(1))
	return release{dir: dir, csv: csv.Name, version: csv.Spec.Version.String(),
		image: deployments[0].Spec.Template.Spec.Containers[0].Image}
}

// timed records how long a step of the test took, for the summary.
func timed(what string, start time.Time) {
	timings = append(timings, fmt.Sprintf("%s %s", what, time.Since(start).Round(100*time.Millisecond)))
}

var _ = BeforeSuite(func(ctx SpecContext) {
	// The clients' own log (the apiserver's deprecation warnings for v1beta1) goes to the
	// spec's output, shown when a spec fails.
	ctrllog.SetLogger(GinkgoLogr)
	suiteStart = time.Now()
	SetDefaultEventuallyTimeout(3 * time.Minute)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	Expect(pipelinev1beta1.AddToScheme(scheme)).To(Succeed())
	Expect(pipelinev1.AddToScheme(scheme)).To(Succeed())
	Expect(operatorsv1alpha1.AddToScheme(scheme)).To(Succeed())
	Expect(operatorsv1.AddToScheme(scheme)).To(Succeed())
	Expect(operatorsv2.AddToScheme(scheme)).To(Succeed())

	kubeconfig := localpod.MustEnv("OLM_KUBECONFIG")
	olmDir := localpod.MustEnv("OLM_DIR")
	opm, logDir, channel = localpod.MustEnv("OPM"), localpod.MustEnv("OLM_LOG_DIR"), localpod.MustEnv("OLM_CHANNEL")
	manager, previousManager := localpod.MustEnv("MANAGER"), localpod.MustEnv("PREVIOUS_MANAGER")
	previous = readRelease(localpod.MustEnv("PREVIOUS_BUNDLE_DIR"))
	current = readRelease(filepath.Join("..", "..", "bundle"))
	next = readRelease(localpod.MustEnv("BUNDLE_DIR"))
	Expect(next.version).NotTo(Equal(current.version), "BUNDLE_DIR holds the next release (hack/rehearse-release.sh)")
	Expect(previous.image).NotTo(Equal(current.image), "the previous release runs its own manager")

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	admin, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())

	By("rendering the catalogs with their bundles inline: the previous release and this one, then the next too")
	tmp := GinkgoT().TempDir()
	currentCatalog, nextCatalog = filepath.Join(tmp, "catalog"), filepath.Join(tmp, "next-catalog")
	inlineCatalog(filepath.Join("..", "..", "catalog"), currentCatalog,
		map[string]string{previous.version: previous.dir, current.version: current.dir})
	inlineCatalog(localpod.MustEnv("CATALOG_DIR"), nextCatalog,
		map[string]string{previous.version: previous.dir, current.version: current.dir, next.version: next.dir})

	start := time.Now()
	By("installing OLM's CRDs server-side (the ClusterServiceVersion CRD is too large for a client-side apply)")
	crds, err := filepath.Glob(filepath.Join(olmDir, "crds", "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(crds).NotTo(BeEmpty())
	var names []string
	for _, f := range crds {
		names = append(names, applyFile(ctx, f)...)
	}
	for _, name := range names {
		Eventually(func(g Gomega) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Status.Conditions).To(ContainElement(And(
				HaveField("Type", apiextensionsv1.Established), HaveField("Status", apiextensionsv1.ConditionTrue))))
		}).Should(Succeed())
	}
	Expect(names).To(ContainElement("olmconfigs.operators.coreos.com"))

	By("starting OLM's olm-operator and catalog-operator")
	for _, ns := range []string{olmNamespace, operatorNamespace} {
		Expect(admin.Create(ctx, namespace(ns))).To(Succeed())
	}
	env := localpod.Environ("KUBECONFIG=" + kubeconfig)
	olmProcesses = []*localpod.Process{
		{Name: "olm-operator", Path: filepath.Join(olmDir, "olm"), Env: env, LogFile: filepath.Join(logDir, "olm-operator.log"),
			Args: []string{"--namespace=" + olmNamespace, "--writeStatusName=", "--writePackageServerStatusName="}},
		{Name: "catalog-operator", Path: filepath.Join(olmDir, "catalog"), Env: env, LogFile: filepath.Join(logDir, "catalog-operator.log"),
			Args: []string{"--namespace=" + olmNamespace, "--writeStatusName="}},
	}
	for _, p := range olmProcesses {
		p.Start()
	}
	timed("OLM CRDs and operators started:", start)

	By("serving the operator's pod on loopback, and the apiserver's way to its webhook Service")
	front, err = localpod.StartAPIFront(cfg)
	Expect(err).NotTo(HaveOccurred())
	pod = &localpod.OperatorPod{Admin: admin, Clientset: clientset, Front: front, Manager: manager,
		Managers: map[string]string{previous.image: previousManager}, Namespace: operatorNamespace, Name: operatorDeployment,
		Dir: filepath.Join(tmp, "operator"), LogDir: logDir}
	pod.Run()
	egress, err = localpod.StartEgressProxy(admin, localpod.MustEnv("OLM_EGRESS_SOCKET"), pod)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if pod != nil {
		pod.Stop()
	}
	for _, p := range append(olmProcesses, catalogServers...) {
		p.Stop()
	}
	if egress != nil {
		egress.Close()
	}
	if front != nil {
		front.Close()
	}
	restarts := make([]string, 0, len(olmProcesses))
	for _, p := range olmProcesses {
		restarts = append(restarts, fmt.Sprintf("%s %d", p.Name, p.Restarts()))
	}
	operator := "not started"
	if front != nil {
		operator = front.Summary()
	}
	_, _ = fmt.Fprintf(os.Stdout, "\nOLM test: %s; total %s\nOLM test: %s\nOLM test: restarts of OLM's operators: %s; the operator's API traffic: %s\n",
		strings.Join(timings, ", "), time.Since(suiteStart).Round(time.Second), localpod.Peaks.Report(), strings.Join(restarts, ", "), operator)
})

// applyFile applies every object of a YAML file server-side and returns their names.
func applyFile(ctx context.Context, file string) []string {
	GinkgoHelper()
	f, err := os.Open(file)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	decoder := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var names []string
	for {
		u := &unstructured.Unstructured{}
		if err := decoder.Decode(&u.Object); err != nil {
			Expect(err).To(MatchError(io.EOF))
			return names
		}
		if len(u.Object) == 0 {
			continue
		}
		Expect(admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("olm-test"), client.ForceOwnership)).To(Succeed(), file)
		names = append(names, u.GetName())
	}
}
