package pipeline

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func routerDeploymentOf(ctx context.Context, p *pipelinev1.Pipeline) *appsv1.Deployment {
	GinkgoHelper()
	return child(ctx, &appsv1.Deployment{}, p.Namespace, resources.RouterObjectName(p))
}

func routerServiceOf(ctx context.Context, p *pipelinev1.Pipeline) *corev1.Service {
	GinkgoHelper()
	return child(ctx, &corev1.Service{}, p.Namespace, resources.RouterObjectName(p))
}

// routerConfigOf is the router configuration the ConfigMap of p holds, as the router parses it.
func routerConfigOf(ctx context.Context, p *pipelinev1.Pipeline) (routerconfig.Config, string) {
	GinkgoHelper()
	cm := child(ctx, &corev1.ConfigMap{}, p.Namespace, resources.RouterObjectName(p))
	data := cm.Data[resources.RouterConfigKey]
	cfg, err := routerconfig.ParseConfig([]byte(data))
	Expect(err).NotTo(HaveOccurred(), "the router refuses the operator's configuration:\n%s", data)
	return cfg, data
}

// rollOutRouter plays the deployment controller for the router's current Deployment.
func rollOutRouter(ctx context.Context, p *pipelinev1.Pipeline) {
	GinkgoHelper()
	Eventually(func() error {
		d := routerDeploymentOf(ctx, p)
		r := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: r, UpdatedReplicas: r,
			ReadyReplicas: r, AvailableReplicas: r}
		return k8sClient.Status().Update(ctx, d)
	}).Should(Succeed())
}

// routerState is the state of the router's Deployment that the status of p reports.
func routerState(ctx context.Context, p *pipelinev1.Pipeline) func() pipelinev1.DeploymentState {
	return func() pipelinev1.DeploymentState { return getPipeline(ctx, p).Status.RouterState }
}

// withRouter sets dataPath.mode Router, the router pinned to the first sample node and exposed
// as a NodePort, and gives the steps router settings.
func withRouter(p *pipelinev1.Pipeline) {
	p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter, Router: &pipelinev1.Router{
		Location: sampleNodes[0], PropagateHeaders: []pipelinev1.HeaderName{"X-User"}}}
	p.Spec.Expose = &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeNodePort}
	p.Spec.Steps[0].TimeoutSeconds = ptr.To[int32](5)
	p.Spec.Steps[1].StopWhen = "status == 404"
}

// withoutRouter sets dataPath.mode Chain: the steps forward by themselves and no router runs.
func withoutRouter(p *pipelinev1.Pipeline) {
	p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain}
}

var _ = Describe("The pipeline router", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("runs the router in front of the steps, follows the spec, repairs drift and goes with dataPath.mode Chain", func() {
		p := createSample(ctx, ns, withRouter)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseCreating))
		bindStorage(ctx, p)
		rollOut(ctx, p)

		By("waiting for the router like for a step")
		Eventually(func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionAvailable)()).Message }).
			Should(ContainSubstring("router: Deployment facedetection-pipeline-router"))
		Expect(phase(ctx, p)()).To(Equal(pipelinev1.PipelinePhaseCreating))
		Expect(getPipeline(ctx, p).Spec.DataPath.Router.Replicas).To(HaveValue(BeEquivalentTo(2)), "defaulted at admission: two router pods")
		for i := range p.Spec.Steps {
			Expect(envOf(deploymentOf(ctx, p, i))).To(HaveKeyWithValue(pipelinev1.EnvNextStepURL, ""),
				"the router calls every step: none forwards by itself")
		}

		By("writing a configuration the router accepts, naming the step Services")
		cfg, data := routerConfigOf(ctx, p)
		Expect(cfg.Pipeline).To(Equal(ns + "/facedetection-pipeline"))
		Expect(cfg.Steps).To(HaveLen(2))
		for i, s := range cfg.Steps {
			Expect(s.Name).To(Equal(p.Spec.Steps[i].Name))
			Expect(s.URL).To(Equal(resources.StepURL(p, i, "") + "/"))
		}
		Expect(cfg.Steps[0].TimeoutSeconds).To(BeEquivalentTo(5))
		Expect(cfg.Steps[1].StopWhen).To(Equal("status == 404"))
		Expect(cfg.PropagateHeaders).To(Equal([]string{"X-User"}))

		By("running the router from the operator's image on its node, restarting with its configuration")
		d := routerDeploymentOf(ctx, p)
		Expect(metav1.IsControlledBy(d, p)).To(BeTrue())
		Expect(d.Labels).To(HaveKeyWithValue(resources.LabelManagedBy, resources.ManagedBy))
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(testenv.RouterImage))
		Expect(d.Spec.Template.Spec.NodeSelector).To(BeEmpty())
		Expect(d.Spec.Template.Spec.Affinity).To(Equal(nameAffinity(sampleNodes[0])))
		hash := d.Spec.Template.Annotations[resources.AnnotationRouterConfigHash]
		Expect(hash).To(Equal(resources.RouterConfigHash(data)))

		By("moving the entry to the router: its Service takes the type expose asks for, the first step's returns to ClusterIP")
		svc := routerServiceOf(ctx, p)
		Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
		Expect(serviceOf(ctx, p, 0).Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
		rollOutRouter(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(routerState(ctx, p)()).To(Equal(pipelinev1.DeploymentStateAvailable))
		Expect(getPipeline(ctx, p).Status.NodePort).To(Equal(svc.Spec.Ports[0].NodePort))

		By("making no write when a converged Pipeline with a router is reconciled again")
		p = getPipeline(ctx, p)
		Consistently(func() string { return getPipeline(ctx, p).ResourceVersion }).Should(Equal(p.ResourceVersion))
		expectNoWritesOnReconcile(ctx, p)

		By("changing the configuration and the pod template when a step's timeout changes")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].TimeoutSeconds = ptr.To[int32](7) })
		Eventually(func() float64 { c, _ := routerConfigOf(ctx, p); return c.Steps[0].TimeoutSeconds }).Should(BeEquivalentTo(7))
		Eventually(func() string {
			return routerDeploymentOf(ctx, p).Spec.Template.Annotations[resources.AnnotationRouterConfigHash]
		}).
			ShouldNot(Equal(hash))
		_, data = routerConfigOf(ctx, p)
		Expect(routerDeploymentOf(ctx, p).Spec.Template.Annotations[resources.AnnotationRouterConfigHash]).To(Equal(resources.RouterConfigHash(data)))

		By("repairing drift of the router's Deployment")
		Eventually(func() error {
			d := routerDeploymentOf(ctx, p)
			d.Spec.Replicas = ptr.To[int32](3)
			d.Spec.Template.Spec.Containers[0].Image = "example.com/other:1"
			return k8sClient.Update(ctx, d)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			d := routerDeploymentOf(ctx, p)
			g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(testenv.RouterImage))
		}).Should(Succeed())

		By("deleting the router's objects when dataPath.mode turns Chain, and giving the entry back to the first step")
		updatePipeline(ctx, p, withoutRouter)
		Eventually(func() bool {
			return gone(ctx, &corev1.ConfigMap{}, ns, resources.RouterObjectName(p)) &&
				gone(ctx, &appsv1.Deployment{}, ns, resources.RouterObjectName(p)) &&
				gone(ctx, &corev1.Service{}, ns, resources.RouterObjectName(p))
		}).Should(BeTrue())
		Eventually(func() corev1.ServiceType { return serviceOf(ctx, p, 0).Spec.Type }).Should(Equal(corev1.ServiceTypeNodePort))
		Eventually(routerState(ctx, p)).Should(BeEmpty())
		By("having the steps forward by themselves again")
		Eventually(func() string { return envOf(deploymentOf(ctx, p, 0))[pipelinev1.EnvNextStepURL] }).
			Should(Equal(resources.StepURL(p, 1, "")))
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	})

	It("gives a router of two unpinned pods a disruption budget, and none to a pinned router or to mode Chain", func() {
		p := createSample(ctx, ns, withRouter, func(p *pipelinev1.Pipeline) { p.Spec.DataPath.Router.Location = "" })
		budget := func() *policyv1.PodDisruptionBudget {
			pdb := &policyv1.PodDisruptionBudget{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, pdb); err != nil {
				return nil
			}
			return pdb
		}
		Eventually(budget).ShouldNot(BeNil(), "two router pods, free to move between the suite's nodes")
		pdb := budget()
		Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
		Expect(pdb.Spec.Selector.MatchLabels).To(Equal(resources.RouterSelector(p)))
		Expect(metav1.IsControlledBy(pdb, getPipeline(ctx, p))).To(BeTrue())

		By("pinning the router to a node: its pods cannot move, so a budget would block a drain of it")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.DataPath.Router.Location = sampleNodes[0] })
		Eventually(budget).Should(BeNil())

		By("unpinning it again, then setting dataPath.mode Chain")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.DataPath.Router.Location = "" })
		Eventually(budget).ShouldNot(BeNil())
		updatePipeline(ctx, p, withoutRouter)
		Eventually(budget).Should(BeNil())
	})

	It("deploys nothing of the router and says why when it knows no router image, and removes one deployed before", func() {
		r, _ := directReconciler(interceptor.Funcs{})
		p := createSample(ctx, ns, forOwnManagers(ns), withRouter)
		passes := func(n int) {
			for range n {
				_, err := reconcileOnce(ctx, r, p)
				Expect(err).NotTo(HaveOccurred())
			}
		}
		By("a router deployed while the operator knew an image")
		r.RouterImage = testenv.RouterImage
		passes(3) // finalizer, then two passes
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, &appsv1.Deployment{})).To(Succeed())
		Expect(serviceOf(ctx, p, 0).Spec.Type).To(Equal(corev1.ServiceTypeClusterIP), "the router is the entry")

		By("an operator without a router image")
		r.RouterImage = ""
		passes(2)
		c := condition(ctx, p, pipelinev1.ConditionDegraded)()
		Expect(c).NotTo(BeNil())
		Expect(c.Reason).To(Equal(pipelinev1.ReasonRouterImageUnknown))
		Expect(c.Message).To(ContainSubstring(resources.EnvRouterImage))
		Expect(phase(ctx, p)()).To(Equal(pipelinev1.PipelinePhaseFailed))
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, &corev1.ConfigMap{})).NotTo(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, &appsv1.Deployment{})).NotTo(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.StepObjectName(p, 0)}, &appsv1.Deployment{})).To(Succeed(),
			"the steps are deployed all the same")
		Expect(serviceOf(ctx, p, 0).Spec.Type).To(Equal(corev1.ServiceTypeNodePort),
			"the entry stays on the first step while there is no router to take it")
		Expect(routerState(ctx, p)()).To(BeEmpty())
	})

	It("replaces the Deployment of a step whose name the router takes within one spec change", func() {
		p := createSample(ctx, ns, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Name = "router" })
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, &appsv1.Deployment{})
		}).Should(Succeed(), "the step named router has the Deployment <pipeline>-router")
		stepUID := routerDeploymentOf(ctx, p).UID

		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Name = "recognize"
			withRouter(p)
		})
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, d)).To(Succeed())
			g.Expect(d.UID).NotTo(Equal(stepUID))
			g.Expect(d.Spec.Selector.MatchLabels).To(Equal(resources.RouterSelector(p)))
		}).Should(Succeed())
		Eventually(func() metav1.ConditionStatus {
			return orEmpty(condition(ctx, p, pipelinev1.ConditionReconciled)()).Status
		}).Should(Equal(metav1.ConditionTrue))
	})

	It("gives the router's name to a step named router within the spec change that sets dataPath.mode Chain", func() {
		p := createSample(ctx, ns, withRouter)
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, &corev1.Service{})
		}).Should(Succeed())
		routerUID := routerDeploymentOf(ctx, p).UID

		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			withoutRouter(p)
			p.Spec.Steps[1].Name = "router"
		})
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, d)).To(Succeed())
			g.Expect(d.UID).NotTo(Equal(routerUID))
			g.Expect(d.Spec.Selector.MatchLabels).To(Equal(resources.StepSelector(getPipeline(ctx, p), 1)))
			svc := &corev1.Service{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, svc)).To(Succeed())
			g.Expect(svc.Spec.Selector).To(Equal(resources.StepSelector(getPipeline(ctx, p), 1)))
		}).Should(Succeed())
		Expect(gone(ctx, &corev1.ConfigMap{}, ns, resources.RouterObjectName(p))).To(BeTrue())
		Eventually(func() metav1.ConditionStatus {
			return orEmpty(condition(ctx, p, pipelinev1.ConditionReconciled)()).Status
		}).Should(Equal(metav1.ConditionTrue))
		Consistently(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, &corev1.Service{})
		}, "2s").Should(Succeed(), "the step's Service stays")
	})

	It("says when the router's node does not exist, and clears once a node of that name joins", func() {
		node := "router-node-" + ns
		p := createSample(ctx, ns, withRouter, func(p *pipelinev1.Pipeline) { p.Spec.DataPath.Router.Location = node })
		Eventually(func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionDegraded)()).Reason }).
			Should(Equal(pipelinev1.ReasonNodeNotFound))
		Expect(orEmpty(condition(ctx, p, pipelinev1.ConditionDegraded)()).Message).
			To(ContainSubstring("router: node " + node + " does not exist"))
		Expect(routerDeploymentOf(ctx, p).Spec.Template.Spec.Affinity).To(Equal(nameAffinity(node)))

		createNode(node)
		DeferCleanup(func(ctx context.Context) {
			_ = k8sClient.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		})
		Eventually(func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionDegraded)()).Reason }).
			ShouldNot(Equal(pipelinev1.ReasonNodeNotFound))
	})

	It("leaves the router alone and says why when the spec gives a configuration the router refuses", func() {
		// Stored without the validating webhook, which would refuse it.
		p := createSample(ctx, ns, withRouter, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].StopWhen = "size(response" })
		Eventually(func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionDegraded)()).Reason }).
			Should(Equal(pipelinev1.ReasonRouterConfigInvalid))
		Expect(orEmpty(condition(ctx, p, pipelinev1.ConditionDegraded)()).Message).To(ContainSubstring("stopWhen"))
		Expect(gone(ctx, &corev1.ConfigMap{}, ns, resources.RouterObjectName(p))).To(BeTrue())
		Expect(gone(ctx, &appsv1.Deployment{}, ns, resources.RouterObjectName(p))).To(BeTrue())
		Expect(serviceOf(ctx, p, 0).Spec.Type).To(Equal(corev1.ServiceTypeNodePort),
			"no router runs: the entry stays on the first step")
		Expect(routerState(ctx, p)()).To(BeEmpty())

		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].StopWhen = "status == 404" })
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.RouterObjectName(p)}, &appsv1.Deployment{})
		}).Should(Succeed())
		Eventually(func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionDegraded)()).Reason }).
			ShouldNot(Equal(pipelinev1.ReasonRouterConfigInvalid))
		Eventually(func() corev1.ServiceType { return serviceOf(ctx, p, 0).Spec.Type }).Should(Equal(corev1.ServiceTypeClusterIP))
		_, good := routerConfigOf(ctx, p)

		By("a running router is left as it is when the configuration turns bad")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].StopWhen = "size(response" })
		Eventually(func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionDegraded)()).Reason }).
			Should(Equal(pipelinev1.ReasonRouterConfigInvalid))
		Consistently(func() string { _, data := routerConfigOf(ctx, p); return data }, "2s").Should(Equal(good))
		Expect(routerServiceOf(ctx, p).Spec.Type).To(Equal(corev1.ServiceTypeNodePort), "the router stays the entry")
	})
})
