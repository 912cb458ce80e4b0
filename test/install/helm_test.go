package install

import (
	"context"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/test/localpod"
)

const (
	// chart is the Helm chart, as a user installs it from a clone; release its release's name.
	chart   = "../../charts/pipeline-operator"
	release = "pipeline-operator"
)

// helm runs the real helm (built from the Go module proxy) against the control plane and
// returns its output, failing on an error.
func helm(args ...string) string {
	GinkgoHelper()
	cmd := exec.Command(localpod.MustEnv("HELM"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "helm %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

var _ = Describe("The Helm chart", Ordered, func() {
	var ctx context.Context
	BeforeAll(func() { ctx = context.Background() })

	It("installs with helm install: the manager makes its certificate and serves the webhooks", func() {
		start := time.Now()
		helm("install", release, chart, "--namespace", operatorNamespace, "--create-namespace")
		run("wait", "--for=condition=Established", "--timeout=60s", "crd/"+pipelineCRD, "crd/modelstorageclasses.distri-infer.ndsl.cn")
		expectServing(ctx)
		Expect(pod.Env()).To(HaveKeyWithValue("POD_NAMESPACE", operatorNamespace))
		timed("helm installed and serving:", start)
	})

	It("refuses a second release in another namespace, naming the first", func() {
		cmd := exec.Command(localpod.MustEnv("HELM"), "--kubeconfig", kubeconfig, "install", "second", chart,
			"--namespace", "second-release", "--create-namespace")
		out, err := cmd.CombinedOutput()
		Expect(err).To(HaveOccurred(), "a second release installed:\n%s", out)
		Expect(string(out)).To(ContainSubstring("by the Helm release " + release + " in namespace " + operatorNamespace + ": one release per cluster"))
		Expect(string(out)).To(ContainSubstring("helm upgrade " + release + " -n " + operatorNamespace))
		err = admin.Get(ctx, client.ObjectKey{Name: "second-release"}, &corev1.Namespace{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the refused release made its namespace: %v", err)
	})

	It("runs the seed Pipeline, applied verbatim as v1beta1 with kubectl, to Running", func() {
		start := time.Now()
		runSeed(ctx)
		timed("seed Running (helm):", start)
	})

	It("upgrades to changed values: the manager restarts with them, keeps its CA and still admits and reconciles", func() {
		start := time.Now()
		apiRefusals := len(front.Refusals())
		helm("upgrade", release, chart, "--namespace", operatorNamespace, "--reuse-values",
			"--set", "commonLabels.team=vision", "--set", "manager.extraArgs={--max-concurrent-reconciles=2}")
		d := &appsv1.Deployment{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}, d)).To(Succeed())
		Expect(d.Labels).To(HaveKeyWithValue("team", "vision"))
		Eventually(func() []string {
			if c := pod.Container(); c != nil {
				return c.Args
			}
			return nil
		}).Should(ContainElement("--max-concurrent-reconciles=2"), "the manager runs the upgraded pod template")
		expectServing(ctx)

		By("a spec change goes through the webhooks and is reconciled")
		p := &pipelinev1.Pipeline{}
		key := client.ObjectKey{Namespace: seedNamespace, Name: "facedetection-pipeline"}
		Eventually(func() error {
			if err := admin.Get(ctx, key, p); err != nil {
				return err
			}
			p.Spec.Steps[1].Replicas = ptr.To[int32](2)
			return admin.Update(ctx, p)
		}).Should(Succeed())
		Eventually(func(g Gomega) *int32 {
			step := &appsv1.Deployment{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: seedNamespace, Name: resources.StepObjectName(p, 1)}, step)).To(Succeed())
			return step.Spec.Replicas
		}).Should(HaveValue(Equal(int32(2))))
		Expect(front.Refusals()[apiRefusals:]).To(BeEmpty(), "the RBAC installed is sufficient")
		timed("helm upgraded:", start)
	})

	It("uninstalls with helm uninstall once the Pipelines are gone, keeping the CRDs", func() {
		start := time.Now()
		deleteSeed(ctx, start)

		helm("uninstall", release, "--namespace", operatorNamespace, "--wait", "--timeout", "2m")
		timed("helm uninstalled:", start)
		Eventually(pod.Env).Should(BeNil(), "the manager stops with its Deployment")
		for _, obj := range []client.Object{
			&appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{},
		} {
			name := operatorDeployment
			if _, ok := obj.(*corev1.Service); ok {
				name = webhookService
			}
			err := admin.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: name}, obj)
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s is left: %v", obj, name, err)
		}
		for _, name := range []string{validatingWebhookConfiguration, mutatingWebhookConfiguration} {
			Expect(run("get", "validatingwebhookconfigurations,mutatingwebhookconfigurations", "-o", "name")).NotTo(ContainSubstring(name))
		}

		By("the CRDs stay (helm.sh/resource-policy: keep), as the chart's crds.keep says; removing them is the user's step")
		for _, name := range []string{pipelineCRD, "modelstorageclasses.distri-infer.ndsl.cn"} {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			Expect(crd.DeletionTimestamp).To(BeNil())
		}
		run("delete", "crd", pipelineCRD, "modelstorageclasses.distri-infer.ndsl.cn", "--timeout=2m")
		// helm leaves the namespace it created; the manager's own objects (the Secret of its
		// certificate, its Lease) go with it.
		run("delete", "namespace", operatorNamespace, "--timeout=2m")
		Expect(admin.Get(ctx, client.ObjectKey{Name: operatorNamespace}, &corev1.Namespace{})).To(Satisfy(apierrors.IsNotFound))
		timed("helm release removed:", start)
	})
})
