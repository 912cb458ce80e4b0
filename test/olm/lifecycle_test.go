package olm

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

const (
	pipelineCRD = "pipelines.distri-infer.ndsl.cn"
	// heldNode is the node the rolling-out Pipeline's steps wait for, tainted until the test
	// lets the rollout end.
	heldNode  = "node-2"
	holdTaint = "pipeline-operator.test/hold"
)

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// createSampleV1beta1 creates namespace ns and in it the sample Pipeline verbatim, as the
// v1beta1 resource the previous release serves alone (samples.PipelineV1beta1). It returns the
// Pipeline's name and namespace, for stored.
func createSampleV1beta1(ctx context.Context, ns string) *pipelinev1.Pipeline {
	GinkgoHelper()
	Expect(admin.Create(ctx, namespace(ns))).To(Succeed())
	p, err := samples.PipelineV1beta1(ns)
	Expect(err).NotTo(HaveOccurred())
	Expect(admin.Create(ctx, p)).To(Succeed())
	return &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
}

// createSample creates namespace ns and in it the sample Pipeline in v1 (samples.Pipeline: the
// seed converted), edited by edit.
func createSample(ctx context.Context, ns string, edit ...func(*pipelinev1.Pipeline)) *pipelinev1.Pipeline {
	GinkgoHelper()
	Expect(admin.Create(ctx, namespace(ns))).To(Succeed())
	p, err := samples.Pipeline(ns)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range edit {
		e(p)
	}
	Expect(admin.Create(ctx, p)).To(Succeed())
	return p
}

// stored reads p as the apiserver stores it, in v1: directly, which asks nothing of the
// operator's conversion webhook and so reads also while the operator's pod restarts, or, under
// the previous release, whose CRD serves v1beta1 alone, as v1beta1 converted here.
func stored(ctx context.Context, g Gomega, p *pipelinev1.Pipeline) *pipelinev1.Pipeline {
	out := &pipelinev1.Pipeline{}
	err := admin.Get(ctx, client.ObjectKeyFromObject(p), out)
	if meta.IsNoMatchError(err) {
		spoke := &pipelinev1beta1.Pipeline{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(p), spoke)).To(Succeed())
		out = &pipelinev1.Pipeline{}
		err = spoke.ConvertTo(out)
	}
	g.Expect(err).NotTo(HaveOccurred())
	return out
}

func phaseOf(ctx context.Context, p *pipelinev1.Pipeline) func(Gomega) pipelinev1.PipelinePhase {
	return func(g Gomega) pipelinev1.PipelinePhase { return stored(ctx, g, p).Status.Phase }
}

// approvePlan approves the InstallPlan of the operator's Subscription (upgrades approved by
// hand) once it is OLM's plan for the ClusterServiceVersion csv, and returns it once complete.
// OLM may make more than one plan while it resolves; the Subscription names the one it follows.
func approvePlan(ctx context.Context, csv string) *operatorsv1alpha1.InstallPlan {
	GinkgoHelper()
	plan := &operatorsv1alpha1.InstallPlan{}
	Eventually(func(g Gomega) {
		sub := &operatorsv1alpha1.Subscription{}
		g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: packageName}, sub)).To(Succeed())
		g.Expect(sub.Status.InstallPlanRef).NotTo(BeNil(), "OLM has planned nothing yet")
		g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: sub.Status.InstallPlanRef.Name}, plan)).To(Succeed())
		g.Expect(plan.Spec.ClusterServiceVersionNames).To(ConsistOf(csv), "the Subscription's plan installs %s", csv)
		if !plan.Spec.Approved {
			plan.Spec.Approved = true
			g.Expect(admin.Update(ctx, plan)).To(Succeed())
		}
	}).Should(Succeed())
	Eventually(func(g Gomega) operatorsv1alpha1.InstallPlanPhase {
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(plan), plan)).To(Succeed())
		return plan.Status.Phase
	}).Should(Equal(operatorsv1alpha1.InstallPlanPhaseComplete))
	return plan
}

// expectRefusedOnlyWhileReplaced checks that every call of the apiserver the egress proxy
// refused went to the operator's webhook Service while no manager process served it: the one
// pod the test plays being replaced in an upgrade, when OLM reads the stored Pipelines in every
// version the new CRD serves (v1beta1 through the conversion webhook) and the previous release
// still writes v1beta1. Their callers retry. It records how many there were.
func expectRefusedOnlyWhileReplaced(what string) {
	GinkgoHelper()
	refused := egress.Refusals()
	for _, r := range refused {
		Expect(r).To(HaveSuffix("no local process serves Service "+operatorNamespace+"/"+webhookService+":443"),
			"the apiserver called something else than the operator's webhook Service")
	}
	timings = append(timings, fmt.Sprintf("%s: %d webhook calls so far refused while the pod was replaced", what, len(refused)))
}

// servedVersions are the versions the Pipeline CRD serves, in its order, the stored one marked
// with a star.
func servedVersions(ctx context.Context) []string {
	GinkgoHelper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	Expect(admin.Get(ctx, client.ObjectKey{Name: pipelineCRD}, crd)).To(Succeed())
	var out []string
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		name := v.Name
		if v.Storage {
			name += "*"
		}
		out = append(out, name)
	}
	return out
}

// csvStatus is a ClusterServiceVersion's phase and reason, or "absent".
func csvStatus(ctx context.Context, name string) func(Gomega) string {
	return func(g Gomega) string {
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		err := admin.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: name}, csv)
		if apierrors.IsNotFound(err) {
			return "absent"
		}
		g.Expect(err).NotTo(HaveOccurred())
		return string(csv.Status.Phase) + "/" + string(csv.Status.Reason)
	}
}

// upgradeable is the Upgradeable condition the operator wrote into the spec of the
// OperatorCondition name.
func upgradeable(ctx context.Context, name string) func(Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		oc := &operatorsv2.OperatorCondition{}
		g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: name}, oc)).To(Succeed())
		c := meta.FindStatusCondition(oc.Spec.Conditions, operatorsv2.Upgradeable)
		g.Expect(c).NotTo(BeNil(), "the operator has not written Upgradeable into OperatorCondition %s", name)
		return c
	}
}

// children lists the resource versions of a Pipeline's children: its Deployments, Services,
// claim, volume and the NetworkPolicy of its steps (which this release makes).
func children(ctx context.Context, p *pipelinev1.Pipeline) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	selector := client.MatchingLabels{resources.LabelPipeline: p.Name}
	deployments := &appsv1.DeploymentList{}
	Expect(admin.List(ctx, deployments, client.InNamespace(p.Namespace), selector)).To(Succeed())
	for _, d := range deployments.Items {
		out["deployment/"+d.Name] = d.ResourceVersion
	}
	services := &corev1.ServiceList{}
	Expect(admin.List(ctx, services, client.InNamespace(p.Namespace), selector)).To(Succeed())
	for _, s := range services.Items {
		out["service/"+s.Name] = s.ResourceVersion
	}
	st := stored(ctx, Default, p).Status
	pvc := &corev1.PersistentVolumeClaim{}
	Expect(admin.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: st.Storage.ClaimName}, pvc)).To(Succeed())
	out["pvc/"+pvc.Name] = pvc.ResourceVersion
	pv := &corev1.PersistentVolume{}
	Expect(admin.Get(ctx, types.NamespacedName{Name: st.Storage.VolumeName}, pv)).To(Succeed())
	out["pv/"+pv.Name] = pv.ResourceVersion
	np := &networkingv1.NetworkPolicy{}
	Expect(admin.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: resources.StepsNetworkPolicyName(p)}, np)).To(Succeed())
	out["networkpolicy/"+np.Name] = np.ResourceVersion
	Expect(out).To(HaveLen(2 + 2 + 2 + 1))
	return out
}

// childPaths are the API paths of p's children, for counting writes to them on the wire.
func childPaths(ctx context.Context, p *pipelinev1.Pipeline) []string {
	GinkgoHelper()
	return []string{
		"/apis/apps/v1/namespaces/" + p.Namespace + "/deployments",
		"/api/v1/namespaces/" + p.Namespace + "/services",
		"/api/v1/namespaces/" + p.Namespace + "/persistentvolumeclaims",
		"/apis/networking.k8s.io/v1/namespaces/" + p.Namespace + "/networkpolicies",
		"/api/v1/persistentvolumes/" + stored(ctx, Default, p).Status.Storage.VolumeName,
	}
}

func setHold(ctx context.Context, on bool) {
	GinkgoHelper()
	Eventually(func() error {
		node := &corev1.Node{}
		if err := admin.Get(ctx, client.ObjectKey{Name: heldNode}, node); err != nil {
			return err
		}
		var taints []corev1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != holdTaint {
				taints = append(taints, t)
			}
		}
		if on {
			taints = append(taints, corev1.Taint{Key: holdTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		}
		node.Spec.Taints = taints
		return admin.Update(ctx, node)
	}).Should(Succeed())
}

var _ = Describe("pipeline-operator installed, upgraded and uninstalled by OLM", Ordered, func() {
	var (
		ctx             context.Context
		steady, rolling *pipelinev1.Pipeline
		steadyChildren  map[string]string
	)
	BeforeEach(func() { ctx = context.Background() })

	It("installs the previous release (v1beta1 alone) through a Subscription and runs a Pipeline with it", func() {
		start := time.Now()
		Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Name: pipelineCRD}, &apiextensionsv1.CustomResourceDefinition{}))).
			To(BeTrue(), "the Pipeline CRD comes from OLM")
		By("a CatalogSource at the address of opm serving the catalog: no registry pod")
		_, addr := serveCatalog("opm-catalog", currentCatalog)
		source := &operatorsv1alpha1.CatalogSource{
			ObjectMeta: metav1.ObjectMeta{Namespace: olmNamespace, Name: packageName},
			Spec:       operatorsv1alpha1.CatalogSourceSpec{SourceType: operatorsv1alpha1.SourceTypeGrpc, Address: addr, DisplayName: packageName},
		}
		Expect(admin.Create(ctx, source)).To(Succeed())
		Eventually(func(g Gomega) string {
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(source), source)).To(Succeed())
			g.Expect(source.Status.GRPCConnectionState).NotTo(BeNil())
			return source.Status.GRPCConnectionState.LastObservedState
		}).Should(Equal("READY"))

		By("an OperatorGroup for all namespaces and a Subscription starting at the previous release, upgrades approved by hand")
		Expect(admin.Create(ctx, &operatorsv1.OperatorGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "global-operators"},
		})).To(Succeed())
		sub := &operatorsv1alpha1.Subscription{
			ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: packageName},
			Spec: &operatorsv1alpha1.SubscriptionSpec{
				Channel: channel, Package: packageName, CatalogSource: packageName, CatalogSourceNamespace: olmNamespace,
				StartingCSV: previous.csv, InstallPlanApproval: operatorsv1alpha1.ApprovalManual,
			},
		}
		Expect(admin.Create(ctx, sub)).To(Succeed())

		By("the approved InstallPlan completes, creating the CRD among the bundle's objects")
		plan := approvePlan(ctx, previous.csv)
		steps := make([]string, 0, len(plan.Status.Plan))
		for _, s := range plan.Status.Plan {
			steps = append(steps, fmt.Sprintf("%s %s: %s", s.Resource.Kind, s.Resource.Name, s.Status))
		}
		Expect(steps).To(ContainElement(BeElementOf(
			"CustomResourceDefinition "+pipelineCRD+": "+string(operatorsv1alpha1.StepStatusCreated),
			"CustomResourceDefinition "+pipelineCRD+": "+string(operatorsv1alpha1.StepStatusPresent))))
		Eventually(csvStatus(ctx, previous.csv)).Should(HavePrefix(string(operatorsv1alpha1.CSVPhaseSucceeded) + "/"))
		Expect(servedVersions(ctx)).To(Equal([]string{"v1beta1*"}), "the previous release serves and stores v1beta1 alone")
		Eventually(pod.Env).Should(HaveKeyWithValue(envOperatorConditionName, previous.csv))
		Eventually(pod.WebhookReady).Should(BeTrue())
		timed("install of the previous release:", start)

		By("a Pipeline of the previous release, applied and stored as v1beta1, reaches running")
		steady = createSampleV1beta1(ctx, "steady")
		Eventually(phaseOf(ctx, steady)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	})

	It("upgrades to this release, which names the Pipeline in v1 as its children's owner, rolls each step's pods once, migrates it to v1 and serves it as v1", func() {
		By("the previous release's children name their Pipeline in v1beta1; the apiserver's changes are followed from here on")
		history := recordHistory(ctx, steady.Namespace)
		DeferCleanup(history.stop)
		owners := history.controlledByPipelines()
		Expect(owners).To(HaveLen(2+2+1), "two Deployments, two Services and a claim: %v", owners)
		Expect(owners).To(HaveEach(pipelinev1beta1.GroupVersion.String()))
		volume := &corev1.PersistentVolume{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: stored(ctx, Default, steady).Status.Storage.VolumeName}, volume)).To(Succeed())
		volumeUID := volume.UID
		paths := childPaths(ctx, steady)
		mark := front.Mark()

		By("approving the upgrade OLM plans to this release")
		start := time.Now()
		approvePlan(ctx, current.csv)
		Eventually(csvStatus(ctx, current.csv)).Should(HavePrefix(string(operatorsv1alpha1.CSVPhaseSucceeded) + "/"))
		Eventually(csvStatus(ctx, previous.csv)).Should(Equal("absent"))
		d := &appsv1.Deployment{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: operatorDeployment}, d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(current.image))
		timed("upgrade from the previous release (approval to new CSV Succeeded):", start)

		By("the manager runs as the Deployment's pod: OLM's OPERATOR_CONDITION_NAME, its ServiceAccount, its certificate")
		Eventually(pod.Env).Should(HaveKeyWithValue(envOperatorConditionName, current.csv))
		Eventually(pod.WebhookReady).Should(BeTrue())
		Eventually(upgradeable(ctx, current.csv)).Should(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", pipelinev1.ReasonNoRollouts)))

		By("the CRD serves v1 and v1beta1 and stores v1; the new manager migrated the stored Pipeline")
		Expect(servedVersions(ctx)).To(Equal([]string{"v1*", "v1beta1"}))
		Eventually(func(g Gomega) []string {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: pipelineCRD}, crd)).To(Succeed())
			return crd.Status.StoredVersions
		}).Should(Equal([]string{"v1"}))

		By("OLM registered the webhooks and the conversion webhook for its own Service")
		validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		Expect(admin.List(ctx, validating, client.MatchingLabels{"olm.owner": current.csv})).To(Succeed())
		Expect(validating.Items).To(HaveLen(1))
		Expect(validating.Items[0].Webhooks[0].ClientConfig.Service).To(And(
			Not(BeNil()), HaveField("Name", webhookService), HaveField("Namespace", operatorNamespace)))
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: pipelineCRD}, crd)).To(Succeed())
		Expect(crd.Spec.Conversion.Webhook.ClientConfig.Service).To(And(
			Not(BeNil()), HaveField("Name", webhookService), HaveField("Namespace", operatorNamespace),
			HaveField("Path", HaveValue(Equal("/convert")))))
		Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).NotTo(BeEmpty(), "OLM's CA")

		By("each step rolls its pods once (absolute step URLs, no Service links), and the Pipeline runs again and reads as v1 and as v1beta1")
		Eventually(func() []string { _, deleted, _, _ := history.outcome(); return deleted }).Should(HaveLen(2), history.summary)
		Eventually(phaseOf(ctx, steady)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		v1 := &pipelinev1.Pipeline{}
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(steady), v1)).To(Succeed())
		Expect(v1.Spec.ModelStorage.NFS).To(HaveValue(HaveField("Server", "192.168.20.235")))
		Expect(v1.Spec.Steps[1].Name).To(Equal("step-2"))
		Expect(v1.Status.Phase).To(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(v1.Status.Storage.VolumeName).To(Equal(volume.Name))
		// Read through the conversion webhook, which may still be called with the previous CA.
		Eventually(func(g Gomega) {
			v1beta1 := &pipelinev1beta1.Pipeline{}
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(steady), v1beta1)).To(Succeed())
			g.Expect(v1beta1.Status.Phase).To(Equal(pipelinev1beta1.PipelinePhaseRunning))
			g.Expect(v1beta1.Spec.Steps[0].Args).To(HaveKeyWithValue(pipelinev1beta1.ListenPortArg, pipelinev1beta1.ArgValue("9080")))
		}).Should(Succeed())

		By("the new manager names the Pipeline in v1 in each child's owner reference, rewriting it once, replaces each step's pod once, " +
			"and adds the NetworkPolicy of the second step")
		Eventually(history.controlledByPipelines).Should(And(HaveLen(len(owners)+1), HaveEach(pipelinev1.GroupVersion.String()),
			HaveKey("NetworkPolicy "+resources.StepsNetworkPolicyName(steady))))
		Consistently(history.mostOwnerChanges, "5s", "500ms").Should(BeNumerically("<=", 1), history.summary)
		history.stop()
		expectRolledOnce(history)
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(volume), volume)).To(Succeed())
		Expect(volume.UID).To(Equal(volumeUID), "the PersistentVolume is the same")
		timings = append(timings, fmt.Sprintf("upgrade from the previous release: %d writes of the operator to the Pipeline's children (%s)",
			len(front.Writes(mark, paths...)), history.summary()))

		By("a new Pipeline through this release's webhooks: defaulted, and a bad one refused")
		// OLM rolls the new certificate out to the webhook configurations, the CRD and the pod
		// in several writes: a dry run tells when the apiserver calls this release with its CA.
		dry, err := samples.Pipeline(steady.Namespace)
		Expect(err).NotTo(HaveOccurred())
		dry.Name = "dry-run"
		Eventually(func() error { return admin.Create(ctx, dry.DeepCopy(), client.DryRunAll) }).Should(Succeed())
		timed("upgrade from the previous release (approval to webhooks called with the new CA):", start)
		fresh := createSample(ctx, "fresh")
		for i, s := range stored(ctx, Default, fresh).Spec.Steps {
			Expect(s.Replicas).To(HaveValue(BeEquivalentTo(1)), "step %d: replicas defaulted by the mutating webhook", i+1)
		}
		Eventually(phaseOf(ctx, fresh)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		bad, err := samples.Pipeline("fresh")
		Expect(err).NotTo(HaveOccurred())
		bad.Name, bad.Spec.Steps[0].Image = "bad-image", "nginx:latest "
		err = admin.Create(ctx, bad)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("not a valid image reference"), "refused by the validating webhook")

		Expect(egress.TunnelsTo(operatorNamespace+"/"+webhookService+":443")).To(BeNumerically(">", 0),
			"the apiserver called the webhooks through OLM's Service")
		expectRefusedOnlyWhileReplaced("upgrade from the previous release")
		Expect(front.Refusals()).To(BeEmpty(), "the RBAC OLM granted the ServiceAccount is sufficient")

		By("later upgrades are approved automatically")
		sub := &operatorsv1alpha1.Subscription{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: packageName}, sub)).To(Succeed())
		sub.Spec.InstallPlanApproval = operatorsv1alpha1.ApprovalAutomatic
		Expect(admin.Update(ctx, sub)).To(Succeed())
	})

	It("holds the upgrade while a Pipeline rolls out, then completes it without writing to running Pipelines", func() {
		steadyChildren = children(ctx, steady)
		paths := childPaths(ctx, steady)
		mark := front.Mark()

		By("a Pipeline rolling out: its steps wait for a node that takes no pods yet")
		setHold(ctx, true)
		DeferCleanup(setHold, context.Background(), false)
		rolling = createSample(ctx, "rolling", func(p *pipelinev1.Pipeline) {
			for i := range p.Spec.Steps {
				p.Spec.Steps[i].Location = heldNode
			}
		})
		Eventually(upgradeable(ctx, current.csv)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", pipelinev1.ReasonPipelinesRollingOut),
			HaveField("Message", ContainSubstring("rolling/"+rolling.Name))))

		By("the catalog publishes the next release, which replaces this one")
		start := time.Now()
		_, addr := serveCatalog("opm-next-catalog", nextCatalog)
		source := &operatorsv1alpha1.CatalogSource{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: olmNamespace, Name: packageName}, source)).To(Succeed())
		source.Spec.Address = addr
		Expect(admin.Update(ctx, source)).To(Succeed())

		By("OLM holds the new ClusterServiceVersion: the operator is not upgradeable")
		Eventually(csvStatus(ctx, next.csv)).Should(Equal(string(operatorsv1alpha1.CSVPhasePending) + "/" +
			string(operatorsv1alpha1.CSVReasonOperatorConditionNotUpgradeable)))
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: next.csv}, csv)).To(Succeed())
		Expect(csv.Spec.Replaces).To(Equal(current.csv))
		Consistently(func(g Gomega) {
			g.Expect(csvStatus(ctx, next.csv)(g)).To(HaveSuffix("/" + string(operatorsv1alpha1.CSVReasonOperatorConditionNotUpgradeable)))
			// OLM marks the running version as being replaced, and leaves it running.
			g.Expect(csvStatus(ctx, current.csv)(g)).To(MatchRegexp("^(Succeeded|Replacing)/"))
			g.Expect(pod.Env()).To(HaveKeyWithValue(envOperatorConditionName, current.csv))
		}, "10s", "500ms").Should(Succeed())

		By("the rollout ends: the upgrade completes by itself")
		held := time.Now()
		setHold(ctx, false)
		Eventually(phaseOf(ctx, rolling)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Eventually(csvStatus(ctx, next.csv)).Should(HavePrefix(string(operatorsv1alpha1.CSVPhaseSucceeded) + "/"))
		Eventually(csvStatus(ctx, current.csv)).Should(Equal("absent"))
		Eventually(pod.Env).Should(HaveKeyWithValue(envOperatorConditionName, next.csv))
		Eventually(upgradeable(ctx, next.csv)).Should(HaveField("Status", metav1.ConditionTrue))
		timed("upgrade (catalog update to new CSV Succeeded):", start)
		timed("of which after the rollout ended:", held)

		By("the running Pipeline's children were not written, during the upgrade or by the new manager")
		Consistently(func() []string { return front.Writes(mark, paths...) }, "5s", "500ms").Should(BeEmpty())
		Expect(children(ctx, steady)).To(Equal(steadyChildren))
		Expect(phaseOf(ctx, steady)(Default)).To(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(front.Refusals()).To(BeEmpty())
		expectRefusedOnlyWhileReplaced("upgrade to the next release")
	})

	It("uninstalls: the operator goes, the CRD and the Pipelines' workloads stay", func() {
		sub := &operatorsv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: packageName}}
		Expect(admin.Delete(ctx, sub)).To(Succeed())
		Expect(admin.Delete(ctx, &operatorsv1alpha1.ClusterServiceVersion{
			ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: next.csv}})).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: operatorDeployment}, &appsv1.Deployment{}))
		}).Should(BeTrue(), "OLM removes the operator's Deployment")
		Eventually(pod.Env).Should(BeNil(), "the manager stops with its Deployment")

		Expect(admin.Get(ctx, client.ObjectKey{Name: pipelineCRD}, &apiextensionsv1.CustomResourceDefinition{})).To(Succeed())
		Consistently(func(g Gomega) {
			for _, p := range []*pipelinev1.Pipeline{steady, rolling} {
				g.Expect(phaseOf(ctx, p)(g)).To(Equal(pipelinev1.PipelinePhaseRunning))
				deployments := &appsv1.DeploymentList{}
				g.Expect(admin.List(ctx, deployments, client.InNamespace(p.Namespace), client.MatchingLabels{resources.LabelPipeline: p.Name})).To(Succeed())
				g.Expect(deployments.Items).To(HaveLen(2))
				for _, d := range deployments.Items {
					g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
				}
			}
		}, "5s", "500ms").Should(Succeed())
		Expect(children(ctx, steady)).To(Equal(steadyChildren))

		By("OLM removes the webhook configurations with the ClusterServiceVersion: Pipelines stay editable in v1, the stored version")
		Eventually(func(g Gomega) int {
			mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
			g.Expect(admin.List(ctx, mutating, client.HasLabels{"olm.owner"})).To(Succeed())
			validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
			g.Expect(admin.List(ctx, validating, client.HasLabels{"olm.owner"})).To(Succeed())
			return len(mutating.Items) + len(validating.Items)
		}).Should(BeZero())
		Eventually(func() error {
			p := &pipelinev1.Pipeline{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(steady), p); err != nil {
				return err
			}
			p.Labels = map[string]string{"edited": "without-operator"}
			return admin.Update(ctx, p)
		}).Should(Succeed())
		By("OLM turned the CRD's conversion off with the operator: v1beta1 is not converted any more")
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: pipelineCRD}, crd)).To(Succeed())
		Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.NoneConverter))
	})
})
