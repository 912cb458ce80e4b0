// Package install holds the end-to-end tests of the two plain install ways (make test-olm runs
// them on its local control plane, before the OLM test): the release manifest, dist/install.yaml
// written by make build-installer, applied with a plain `kubectl apply --server-side -f`; and the
// Helm chart, charts/pipeline-operator, installed, upgraded and uninstalled with the real helm.
// Each runs the seed Pipeline to Running through what it installed — the manager of its
// Deployment, its webhooks with the certificate the manager makes itself — and removes
// everything again.
//
// kwok plays the manager's pod in the cluster; localpod.OperatorPod runs the manager binary as
// that pod would, on loopback, and kube-apiserver reaches its webhook Service through
// localpod.EgressProxy.
package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/test/localpod"
)

const (
	// The namespace, Deployment and webhook objects config/default installs.
	operatorNamespace              = "pipeline-operator-system"
	operatorDeployment             = "pipeline-operator-controller-manager"
	webhookService                 = "pipeline-operator-webhook-service"
	validatingWebhookConfiguration = "pipeline-operator-validating-webhook-configuration"
	mutatingWebhookConfiguration   = "pipeline-operator-mutating-webhook-configuration"
	pipelineCRD                    = "pipelines.distri-infer.ndsl.cn"
	// seedNamespace holds the seed Pipeline.
	seedNamespace = "install-seed"
	// seedSample is the seed Pipeline as users hold it (v1beta1).
	seedSample = "../../config/samples/distri-infer_v1beta1_pipeline.yaml"
)

var (
	scheme     = runtime.NewScheme()
	admin      client.Client
	kubeconfig string
	kubectl    string
	installer  string
	front      *localpod.APIFront
	egress     *localpod.EgressProxy
	pod        *localpod.OperatorPod
	timings    []string
	suiteStart time.Time
)

func TestInstall(t *testing.T) {
	if os.Getenv("INSTALL_KUBECONFIG") == "" {
		t.Skip("INSTALL_KUBECONFIG is not set: run `make test-olm`, which builds dist/install.yaml and starts a local control plane for it")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "pipeline-operator installed from the release manifest and the Helm chart")
}

// timed records how long a step took, for the summary.
func timed(what string, start time.Time) {
	timings = append(timings, fmt.Sprintf("%s %s", what, time.Since(start).Round(100*time.Millisecond)))
}

var _ = BeforeSuite(func() {
	// The clients' own log (the apiserver's deprecation warnings for v1beta1) goes to the
	// spec's output, shown when a spec fails.
	ctrllog.SetLogger(GinkgoLogr)
	suiteStart = time.Now()
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	Expect(pipelinev1.AddToScheme(scheme)).To(Succeed())

	kubeconfig, kubectl, installer = localpod.MustEnv("INSTALL_KUBECONFIG"), localpod.MustEnv("KUBECTL"), localpod.MustEnv("INSTALLER")
	logDir := localpod.MustEnv("INSTALL_LOG_DIR")
	Expect(os.MkdirAll(logDir, 0o755)).To(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	admin, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	clientset, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())

	By("playing the manager's pod on loopback once its Deployment exists, and the apiserver's way to its webhook Service")
	front, err = localpod.StartAPIFront(cfg)
	Expect(err).NotTo(HaveOccurred())
	pod = &localpod.OperatorPod{Admin: admin, Clientset: clientset, Front: front, Manager: localpod.MustEnv("MANAGER"),
		Namespace: operatorNamespace, Name: operatorDeployment, Dir: GinkgoT().TempDir(), LogDir: logDir}
	pod.Run()
	egress, err = localpod.StartEgressProxy(admin, localpod.MustEnv("INSTALL_EGRESS_SOCKET"), pod)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if pod != nil {
		pod.Stop()
	}
	if egress != nil {
		egress.Close()
	}
	if front != nil {
		front.Close()
	}
	_, _ = fmt.Fprintf(os.Stdout, "\ninstall tests: %s; total %s\n", strings.Join(timings, ", "), time.Since(suiteStart).Round(time.Second))
})

// run runs kubectl against the control plane and returns its output, failing on an error.
func run(args ...string) string {
	GinkgoHelper()
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// manifest is every object of the release manifest.
func manifest() []*unstructured.Unstructured {
	GinkgoHelper()
	data, err := os.ReadFile(installer)
	Expect(err).NotTo(HaveOccurred())
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{}
		Expect(utilyaml.Unmarshal(doc, &u.Object)).To(Succeed())
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

var _ = Describe("The release manifest", Ordered, func() {
	var ctx context.Context
	BeforeAll(func() { ctx = context.Background() })

	It("installs with kubectl apply --server-side: the manager makes its certificate and serves the webhooks", func() {
		start := time.Now()
		objs := manifest()
		kinds := map[string]int{}
		for _, u := range objs {
			kinds[u.GetKind()]++
		}
		Expect(kinds).To(HaveKey("CustomResourceDefinition"))
		Expect(kinds).To(HaveKey("Deployment"))
		Expect(kinds).To(HaveKey("ValidatingWebhookConfiguration"))
		Expect(kinds).To(HaveKey("ValidatingAdmissionPolicy"))
		Expect(kinds).To(HaveKey("NetworkPolicy"))

		run("apply", "--server-side", "-f", installer)
		run("wait", "--for=condition=Established", "--timeout=60s", "crd/"+pipelineCRD, "crd/modelstorageclasses.distri-infer.ndsl.cn")

		expectServing(ctx)
		Expect(pod.Env()).To(HaveKeyWithValue("POD_NAMESPACE", operatorNamespace))
		timed("applied and serving:", start)
	})

	It("runs the seed Pipeline, applied verbatim as v1beta1 with kubectl, to Running", func() {
		start := time.Now()
		runSeed(ctx)
		timed("seed Running:", start)
	})

	It("uninstalls with kubectl delete -f once the Pipelines are gone, leaving nothing behind", func() {
		start := time.Now()
		deleteSeed(ctx, start)

		run("delete", "-f", installer, "--timeout=2m")
		timed("manifest deleted:", start)
		Eventually(pod.Env).Should(BeNil(), "the manager stops with its Deployment")
		for _, u := range manifest() {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(u.GroupVersionKind())
			err := admin.Get(ctx, client.ObjectKeyFromObject(u), obj)
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s %s is left: %v", u.GetKind(), u.GetName(), err)
		}
		crds := &apiextensionsv1.CustomResourceDefinitionList{}
		Expect(admin.List(ctx, crds)).To(Succeed())
		for _, crd := range crds.Items {
			Expect(crd.Spec.Group).NotTo(Equal(pipelinev1.GroupVersion.Group), "CRD %s is left", crd.Name)
		}
		pvs := &corev1.PersistentVolumeList{}
		Expect(admin.List(ctx, pvs)).To(Succeed())
		Expect(pvs.Items).To(BeEmpty())
		// The manager's own objects lived in its namespace (the Secret of its certificate, its
		// Lease, its events): gone with it.
		Expect(admin.Get(ctx, client.ObjectKey{Name: operatorNamespace}, &corev1.Namespace{})).To(Satisfy(apierrors.IsNotFound))
		timed("uninstalled:", start)
	})
})

// expectServing waits until the manager, run as its Deployment's pod, serves its webhooks and
// keeps its own CA in both webhook configurations and the CRD.
func expectServing(ctx context.Context) {
	GinkgoHelper()
	By("the manager, run as its Deployment's pod, keeps its own CA in both webhook configurations and the CRD")
	Eventually(pod.WebhookReady).Should(BeTrue())
	Eventually(func(g Gomega) {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: validatingWebhookConfiguration}, v)).To(Succeed())
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: mutatingWebhookConfiguration}, m)).To(Succeed())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: pipelineCRD}, crd)).To(Succeed())
		ca := crd.Spec.Conversion.Webhook.ClientConfig.CABundle
		g.Expect(ca).NotTo(BeEmpty())
		for _, w := range v.Webhooks {
			g.Expect(w.ClientConfig.CABundle).To(Equal(ca), "webhook %s", w.Name)
		}
		for _, w := range m.Webhooks {
			g.Expect(w.ClientConfig.CABundle).To(Equal(ca), "webhook %s", w.Name)
		}
	}).Should(Succeed())
}

// runSeed applies the seed Pipeline verbatim (v1beta1) with kubectl into its own namespace and
// waits until it runs, its admission having gone through the webhook Service.
func runSeed(ctx context.Context) {
	GinkgoHelper()
	tunnels := egress.TunnelsTo(operatorNamespace + "/" + webhookService + ":443")
	egressRefusals, apiRefusals := len(egress.Refusals()), len(front.Refusals())
	Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: seedNamespace}})).To(Succeed())
	run("apply", "-n", seedNamespace, "-f", seedSample)
	p := &pipelinev1.Pipeline{}
	Eventually(func(g Gomega) pipelinev1.PipelinePhase {
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: seedNamespace, Name: "facedetection-pipeline"}, p)).To(Succeed())
		return p.Status.Phase
	}).Should(Equal(pipelinev1.PipelinePhaseRunning))
	Expect(p.Status.ReadySteps).To(HaveValue(Equal(int32(2))))
	Expect(egress.TunnelsTo(operatorNamespace+"/"+webhookService+":443")).To(BeNumerically(">", tunnels),
		"the apiserver called the webhooks through their Service")
	// Counted from here: a manager stopped by an earlier uninstall may have been refused while
	// its RBAC went before it.
	Expect(egress.Refusals()[egressRefusals:]).To(BeEmpty())
	Expect(front.Refusals()[apiRefusals:]).To(BeEmpty(), "the RBAC installed is sufficient")
}

// deleteSeed deletes the seed Pipeline, waits until its volume is gone, and deletes its
// namespace.
func deleteSeed(ctx context.Context, start time.Time) {
	GinkgoHelper()
	run("delete", "-n", seedNamespace, "-f", seedSample, "--timeout=2m")
	pvs := &corev1.PersistentVolumeList{}
	Eventually(func(g Gomega) []corev1.PersistentVolume {
		g.Expect(admin.List(ctx, pvs, client.MatchingLabels{resources.LabelManagedBy: resources.ManagedBy})).To(Succeed())
		return pvs.Items
	}).Should(BeEmpty(), "the Pipeline's volume goes with it")
	timed("seed deleted:", start)
	run("delete", "namespace", seedNamespace, "--timeout=2m")
	timed("its namespace deleted:", start)
}

// The manager's log directory, for a failure message.
var _ = ReportAfterSuite("the manager's logs", func(r Report) {
	if !r.SuiteSucceeded {
		if dir := os.Getenv("INSTALL_LOG_DIR"); dir != "" {
			_, _ = fmt.Fprintf(os.Stdout, "the manager's logs: %s\n", filepath.Clean(dir))
		}
	}
})
