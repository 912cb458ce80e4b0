package e2e

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	gomegatypes "github.com/onsi/gomega/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

func newNamespace(ctx context.Context) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	Expect(admin.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { _ = admin.Delete(ctx, ns) })
	return ns.Name
}

// createSample creates the sample Pipeline of the product design in ns, as the apiserver stores
// it (samples.Pipeline: the seed converted to v1), edited by edit.
func createSample(ctx context.Context, ns string, edit ...func(*pipelinev1.Pipeline)) *pipelinev1.Pipeline {
	GinkgoHelper()
	p, err := samples.Pipeline(ns)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range edit {
		e(p)
	}
	Expect(admin.Create(ctx, p)).To(Succeed())
	return p
}

// createSampleV1beta1 applies the sample Pipeline of the product design verbatim, as the
// v1beta1 resource its users hold (samples.PipelineV1beta1), in ns, edited by edit, and returns
// it as it reads in v1.
func createSampleV1beta1(ctx context.Context, ns string, edit ...func(*pipelinev1beta1.Pipeline)) *pipelinev1.Pipeline {
	GinkgoHelper()
	p, err := samples.PipelineV1beta1(ns)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range edit {
		e(p)
	}
	Expect(admin.Create(ctx, p)).To(Succeed())
	return get(ctx, &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}})
}

// get reads p from the apiserver, in v1.
func get(ctx context.Context, p *pipelinev1.Pipeline) *pipelinev1.Pipeline {
	GinkgoHelper()
	out := &pipelinev1.Pipeline{}
	Expect(admin.Get(ctx, client.ObjectKeyFromObject(p), out)).To(Succeed())
	return out
}

// getV1beta1 reads p from the apiserver in v1beta1, converted by the operator's webhook.
func getV1beta1(ctx context.Context, p *pipelinev1.Pipeline) *pipelinev1beta1.Pipeline {
	GinkgoHelper()
	out := &pipelinev1beta1.Pipeline{}
	Expect(admin.Get(ctx, client.ObjectKeyFromObject(p), out)).To(Succeed())
	return out
}

func phaseOf(ctx context.Context, p *pipelinev1.Pipeline) func() pipelinev1.PipelinePhase {
	return func() pipelinev1.PipelinePhase { return get(ctx, p).Status.Phase }
}

func stepPods(ctx context.Context, p *pipelinev1.Pipeline, step int) []corev1.Pod {
	GinkgoHelper()
	pods := &corev1.PodList{}
	Expect(admin.List(ctx, pods, client.InNamespace(p.Namespace),
		client.MatchingLabels{resources.LabelPipeline: p.Name, resources.LabelStep: strconv.Itoa(step)})).To(Succeed())
	return pods.Items
}

// v1Webhook matches a webhook of a deployed configuration, as pointWebhooksAt left it: named
// name, calling path, for Pipelines of v1 with matchPolicy Equivalent (so that a v1beta1 request
// reaches it converted to v1).
func v1Webhook(name, path string) gomegatypes.GomegaMatcher {
	return And(
		HaveField("Name", name),
		HaveField("ClientConfig.URL", HaveValue(HaveSuffix(path))),
		HaveField("MatchPolicy", HaveValue(Equal(admissionregistrationv1.Equivalent))),
		HaveField("Rules", ConsistOf(And(
			HaveField("Rule.APIGroups", ConsistOf(pipelinev1.GroupVersion.Group)),
			HaveField("Rule.APIVersions", ConsistOf(pipelinev1.GroupVersion.Version)),
			HaveField("Rule.Resources", ConsistOf("pipelines"))))),
	)
}

// deploymentName is the name of the Deployment of step (1-based), from p's status.
func deploymentName(p *pipelinev1.Pipeline, step int) string {
	GinkgoHelper()
	steps := get(context.Background(), p).Status.Steps
	if len(steps) < step {
		Fail(fmt.Sprintf("status.steps of Pipeline %s lists %d steps, not step %d", p.Name, len(steps), step))
	}
	return steps[step-1].DeploymentName
}

var _ = Describe("pipeline-operator on a local control plane", Ordered, func() {
	var ctx context.Context
	BeforeEach(func() { ctx = context.Background() })

	It("runs the design's Pipeline, applied verbatim as v1beta1, with each step on its node, wired to the next", func() {
		ns := newNamespace(ctx)
		p := createSampleV1beta1(ctx, ns)
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		kubectlWaitReady(p)
		Expect(kstatusOf(ctx, p)()).To(Equal(kstatus.CurrentStatus))

		By("the Pipeline applied as v1beta1 reads as v1, and kubectl shows v1 with the same columns")
		v1 := get(ctx, p)
		Expect(v1.Spec.ModelStorage.Type).To(Equal(pipelinev1.ModelStorageTypeNFS))
		Expect(v1.Spec.ModelStorage.NFS).To(HaveValue(And(
			HaveField("Server", "192.168.20.235"), HaveField("Path", "/home/aiedge/csiTest"))))
		Expect(v1.Spec.Steps[0]).To(And(HaveField("Name", "step-1"), HaveField("Location", "xx-test-node236"),
			HaveField("Port", HaveValue(BeEquivalentTo(9080)))))
		Expect(v1.Spec.Steps[1]).To(And(HaveField("Name", "step-2"), HaveField("Location", "xx-test-node239")))
		st := v1.Status
		Expect(st.Phase).To(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(st.ReadySteps).To(HaveValue(BeEquivalentTo(2)))
		Expect(st.TotalSteps).To(HaveValue(BeEquivalentTo(2)))
		Expect(st.Models).To(Equal([]string{"facedetection-1", "facedetection-2"}))
		Expect(st.Storage.VolumeState).To(Equal(corev1.VolumeBound))
		Expect(st.Storage.ClaimState).To(Equal(corev1.ClaimBound))
		Expect(st.Steps).To(HaveLen(2))
		for i, s := range st.Steps {
			Expect(s).To(And(HaveField("Name", v1.Spec.Steps[i].Name),
				HaveField("DeploymentState", pipelinev1.DeploymentStateAvailable),
				HaveField("ServiceState", pipelinev1.ServiceStateReady),
				HaveField("State", pipelinev1.StepStateReady),
				HaveField("ReadyReplicas", HaveValue(BeEquivalentTo(1)))), "status.steps[%d]", i)
		}
		Expect(kubectl("api-resources", "--api-group="+pipelinev1.GroupVersion.Group, "--no-headers")).
			To(MatchRegexp(`(?m)^pipelines\s+pl,pls,dipl\s+`+regexp.QuoteMeta(pipelinev1.GroupVersion.String())+`\s+true\s+Pipeline`),
				"kubectl prefers v1")
		table := kubectl("get", "pipelines", "-n", ns)
		Expect(table).To(MatchRegexp(`^NAME\s+READY\s+PHASE\s+REASON\s+MODELS\s+AGE\n`))
		Expect(table).To(MatchRegexp(`(?m)^` + p.Name + `\s+2/2\s+Running\s+Running\s+facedetection-1, facedetection-2\s+\S+$`))
		wide := kubectl("get", "dipl", "-n", ns, "-o", "wide")
		Expect(wide).To(MatchRegexp(`^NAME\s+READY\s+PHASE\s+REASON\s+MODELS\s+URL\s+MESSAGE\s+AGE\n`))
		Expect(wide).NotTo(ContainSubstring("{"), "-o wide prints no JSON")
		Expect(kubectl("get", "distri-infer", "-n", ns, "-o", "name")).To(ContainSubstring("pipeline.distri-infer.ndsl.cn/"+p.Name),
			"the category lists Pipelines")
		Expect(kubectl("get", "pipeline", p.Name, "-n", ns, "-o", "jsonpath={.status.steps[*].state}")).To(Equal("Ready Ready"))

		By("and it still reads as the v1beta1 it was applied as, with the status in v1beta1's form")
		seed, err := samples.PipelineV1beta1(ns)
		Expect(err).NotTo(HaveOccurred())
		beta := getV1beta1(ctx, p)
		Expect(beta.Spec.Steps[0].Args).To(Equal(seed.Spec.Steps[0].Args))
		Expect(beta.Spec.ModelStorage.Type).To(Equal(seed.Spec.ModelStorage.Type))
		Expect(beta.Spec.ModelStorage.CSIParameter).To(Equal(seed.Spec.ModelStorage.CSIParameter))
		Expect(beta.Status.Phase).To(Equal(pipelinev1beta1.PipelinePhaseRunning))
		Expect(beta.Status.ReadySteps).To(Equal("2/2"))
		Expect(beta.Status.DetailPhase.PVPhase).To(Equal(corev1.VolumeBound))
		Expect(beta.Status.DetailPhase.PVCPhase).To(Equal(corev1.ClaimBound))

		for i, node := range []string{"xx-test-node236", "xx-test-node239"} {
			pods := stepPods(ctx, p, i+1)
			Expect(pods).To(HaveLen(1))
			Expect(pods[0].Spec.NodeName).To(Equal(node), "step %d runs on the node named by its location", i+1)
			Expect(pods[0].Status.Phase).To(Equal(corev1.PodRunning))
		}

		By("NEXT_STEP_URL of step 1 resolving to the Service of step 2, which routes to step 2's pod")
		d := &appsv1.Deployment{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: deploymentName(p, 1)}, d)).To(Succeed())
		var next string
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == pipelinev1.EnvNextStepURL {
				next = e.Value
			}
		}
		u, err := url.Parse(next)
		Expect(err).NotTo(HaveOccurred(), next)
		// An absolute name, in the cluster's domain: no DNS search domain is tried first.
		Expect(u.Hostname()).To(HaveSuffix("."), next)
		host := strings.Split(strings.TrimSuffix(u.Hostname(), "."), ".")
		Expect(host).To(HaveLen(5), next)
		Expect(host[1:]).To(Equal([]string{ns, "svc", "cluster", "local"}))
		svc := &corev1.Service{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: host[0]}, svc)).To(Succeed())
		Expect(strconv.Itoa(int(svc.Spec.Ports[0].Port))).To(Equal(u.Port()))
		step2 := stepPods(ctx, p, 2)[0]
		Eventually(func() []string {
			slices := &discoveryv1.EndpointSliceList{}
			Expect(admin.List(ctx, slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name})).To(Succeed())
			var pods []string
			for _, s := range slices.Items {
				for _, ep := range s.Endpoints {
					if ep.TargetRef != nil {
						pods = append(pods, ep.TargetRef.Name)
					}
				}
			}
			return pods
		}).Should(ConsistOf(step2.Name))
	})

	It("names the step and the missing node when a location has no node", func() {
		ns := newNamespace(ctx)
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Location = "no-such-node" })
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseFailed))
		Eventually(kstatusOf(ctx, p)).Should(Equal(kstatus.FailedStatus))
		deg := meta.FindStatusCondition(get(ctx, p).Status.Conditions, pipelinev1.ConditionDegraded)
		Expect(deg).NotTo(BeNil())
		Expect(deg.Reason).To(Equal(pipelinev1.ReasonNodeNotFound))
		Expect(deg.Message).To(ContainSubstring("step 2 (step-2): node no-such-node does not exist"))
		Eventually(func() []string {
			list := &eventsv1.EventList{}
			Expect(admin.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range list.Items {
				if e.Regarding.Name == p.Name && e.Type == corev1.EventTypeWarning {
					notes = append(notes, e.Reason+": "+e.Note)
				}
			}
			return notes
		}).Should(ContainElement(ContainSubstring("NodeNotFound: step 2 (step-2): node no-such-node")))
		Consistently(func() []corev1.Pod { return stepPods(ctx, p, 2) }, "2s").Should(
			HaveEach(HaveField("Spec.NodeName", BeEmpty())), "no node can take the step's pod")
	})

	It("admits Pipelines through the webhooks make deploy registers, in v1 and in v1beta1: defaults stored, bad ones refused", func() {
		By("make deploy registers the webhooks of v1; matchPolicy Equivalent sends them v1beta1 requests too, converted")
		mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: mutatingWebhookConfiguration}, mutating)).To(Succeed())
		Expect(mutating.Webhooks).To(ContainElement(v1Webhook("mpipeline.distri-infer.ndsl.cn", "/mutate-distri-infer-ndsl-cn-v1-pipeline")))
		validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: validatingWebhookConfiguration}, validating)).To(Succeed())
		Expect(validating.Webhooks).To(ContainElement(v1Webhook("vpipeline.distri-infer.ndsl.cn", "/validate-distri-infer-ndsl-cn-v1-pipeline")))

		By("a v1 Pipeline is stored with the defaults the mutating webhook writes")
		ns := newNamespace(ctx)
		p := createSample(ctx, ns)
		stored := get(ctx, p)
		for i, s := range stored.Spec.Steps {
			Expect(s.Replicas).To(HaveValue(BeEquivalentTo(1)), "step %d: replicas, which only the mutating webhook defaults", i+1)
		}
		Expect(stored.Spec.Steps[0].Port).To(HaveValue(BeEquivalentTo(9080)))
		Expect(stored.Spec.Steps[1].Port).To(HaveValue(BeEquivalentTo(80)))
		Expect(stored.Spec.ModelStorage.NFS).To(HaveValue(HaveField("AccessModes", Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}))))
		Expect(stored.Spec.ModelStorage.MountPath).To(Equal("/models"))

		By("a bad Pipeline is refused in v1, and the same Pipeline in v1beta1, naming the same field")
		bad, err := samples.Pipeline(ns)
		Expect(err).NotTo(HaveOccurred())
		bad.Name = "bad-image"
		bad.Spec.Steps[0].Image = "nginx:latest "
		err = admin.Create(ctx, bad)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.steps[0].image"))
		Expect(err.Error()).To(ContainSubstring("not a valid image reference"))
		badV1beta1, err := samples.PipelineV1beta1(ns)
		Expect(err).NotTo(HaveOccurred())
		badV1beta1.Name = "bad-image"
		badV1beta1.Spec.Steps[0].Image = "nginx:latest "
		err = admin.Create(ctx, badV1beta1)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.steps[0].image"))
		Expect(err.Error()).To(ContainSubstring("not a valid image reference"))
	})

	It("rolls out a new image, passing through creating back to running", func() {
		ns := newNamespace(ctx)
		p := createSample(ctx, ns)
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		old := stepPods(ctx, p, 1)[0].Name

		// The watch sees every phase the Pipeline passes through.
		w, err := admin.Watch(ctx, &pipelinev1.PipelineList{}, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()

		Eventually(func() error {
			latest := get(ctx, p)
			latest.Spec.Steps[0].Image = "nginx:1.27"
			return admin.Update(ctx, latest)
		}).Should(Succeed())

		// The phases of the new generation, in order, without repeats.
		var seen []pipelinev1.PipelinePhase
		Eventually(func() []pipelinev1.PipelinePhase {
			for {
				select {
				case ev := <-w.ResultChan():
					pl, ok := ev.Object.(*pipelinev1.Pipeline)
					if ok && pl.Status.ObservedGeneration > p.Generation {
						if n := len(seen); n == 0 || seen[n-1] != pl.Status.Phase {
							seen = append(seen, pl.Status.Phase)
						}
					}
				default:
					return seen
				}
			}
		}).Should(Equal([]pipelinev1.PipelinePhase{pipelinev1.PipelinePhaseCreating, pipelinev1.PipelinePhaseRunning}))
		pods := stepPods(ctx, p, 1)
		Expect(pods).To(HaveLen(1))
		Expect(pods[0].Name).NotTo(Equal(old))
		Expect(pods[0].Spec.Containers[0].Image).To(Equal("nginx:1.27"))
	})

	It("removes every child on delete, the PersistentVolume included, and nothing else", func() {
		ns := newNamespace(ctx)
		bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: ns}}
		Expect(admin.Create(ctx, bystander)).To(Succeed())
		bystanderSvc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		Expect(admin.Create(ctx, bystanderSvc)).To(Succeed())

		p := createSample(ctx, ns)
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		pv := get(ctx, p).Status.Storage.VolumeName
		Expect(pv).NotTo(BeEmpty())

		Expect(admin.Delete(ctx, p)).To(Succeed())
		Eventually(func() bool { return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(p), p)) }).Should(BeTrue())
		selector := client.MatchingLabels{resources.LabelPipeline: p.Name}
		Eventually(func(g Gomega) {
			deployments := &appsv1.DeploymentList{}
			g.Expect(admin.List(ctx, deployments, client.InNamespace(ns), selector)).To(Succeed())
			g.Expect(deployments.Items).To(BeEmpty())
			pods := &corev1.PodList{}
			g.Expect(admin.List(ctx, pods, client.InNamespace(ns), selector)).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
			services := &corev1.ServiceList{}
			g.Expect(admin.List(ctx, services, client.InNamespace(ns), selector)).To(Succeed())
			g.Expect(services.Items).To(BeEmpty())
			claims := &corev1.PersistentVolumeClaimList{}
			g.Expect(admin.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
			g.Expect(claims.Items).To(BeEmpty())
			g.Expect(apierrors.IsNotFound(admin.Get(ctx, types.NamespacedName{Name: pv}, &corev1.PersistentVolume{}))).To(BeTrue())
		}).Should(Succeed())

		Expect(admin.Get(ctx, client.ObjectKeyFromObject(bystander), bystander)).To(Succeed())
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(bystanderSvc), bystanderSvc)).To(Succeed())
	})

	It("runs the manager Deployment of make deploy (kwok plays its pod) in a namespace enforcing restricted", func() {
		ns := &corev1.Namespace{}
		Expect(admin.Get(ctx, types.NamespacedName{Name: operatorNamespace}, ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: "pipeline-operator-controller-manager"}, d)).To(Succeed())
			g.Expect(d.Spec.Replicas).To(HaveValue(BeNumerically(">=", 2)), "two replicas serve the webhooks")
			// Every pod was created: the restricted level admits them (a refused pod leaves the
			// ReplicaSet short, with a ReplicaFailure condition). Whether each is available also
			// depends on its node, which another spec here stops for a while.
			g.Expect(d.Status.Replicas).To(Equal(*d.Spec.Replicas), "the restricted Pod Security level admits the manager's pods")
			g.Expect(d.Status.AvailableReplicas).To(BeNumerically(">=", 1))
			for _, c := range d.Status.Conditions {
				g.Expect(c.Type).NotTo(Equal(appsv1.DeploymentReplicaFailure), "%s: %s", c.Reason, c.Message)
			}
		}).Should(Succeed())
	})

	It("was never refused by the apiserver: the RBAC of config/rbac is sufficient", func() {
		Expect(forbidden.count.Load()).To(BeZero(), "refused requests: %s", describeRefusals())
	})
})

var _ = Describe("The pipeline router on a local control plane", func() {
	It("runs the router of a Pipeline on its node, in front of the steps", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter, Router: &pipelinev1.Router{Location: "xx-test-node239"}}
			p.Spec.Steps[0].StopWhen = "status == 200 && response.faces == 0"
		})
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		st := get(ctx, p).Status
		Expect(st.RouterState).To(Equal(pipelinev1.DeploymentStateAvailable))
		Expect(st.RouterNode).To(Equal("xx-test-node239"))
		Expect(st.ReadySteps).To(HaveValue(BeEquivalentTo(2)))
		Expect(st.Steps).To(HaveLen(2))

		By("scheduling the router's pods on the node of dataPath.router.location, from the manager's image")
		pods := &corev1.PodList{}
		Expect(admin.List(ctx, pods, client.InNamespace(ns),
			client.MatchingLabels{resources.LabelPipeline: p.Name, "app.kubernetes.io/component": "router"})).To(Succeed())
		Expect(pods.Items).To(HaveLen(2), "two router pods by default")
		for _, pod := range pods.Items {
			Expect(pod.Spec.NodeName).To(Equal("xx-test-node239"))
			Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
			Expect(pod.Spec.Containers[0].Image).To(Equal(routerImage))
		}

		By("configuring it with the step Services, in order")
		cm := &corev1.ConfigMap{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: p.Name + "-router"}, cm)).To(Succeed())
		cfg, err := routerconfig.ParseConfig([]byte(cm.Data["config.json"]))
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Steps).To(HaveLen(2))
		for i, s := range cfg.Steps {
			Expect(s.Name).To(Equal(st.Steps[i].Name))
			Expect(s.URL).To(Equal(st.Steps[i].URL + "/"))
		}
		Expect(cfg.Steps[0].StopWhen).To(Equal("status == 200 && response.faces == 0"))
	})
})
