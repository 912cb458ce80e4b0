package e2e

import (
	"context"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// gcForgetsVersions is how long kube-controller-manager may go on resolving owner references
// through an API version the apiserver no longer serves: it resets the REST mapper its garbage
// collector reads them with every 30 s (and the collector resyncs its monitors as often), plus
// a margin.
const gcForgetsVersions = 35 * time.Second

// childRef is how a child names its controller: the apiVersion of the reference, and the
// child's own UID (a child made again is another child).
type childRef struct {
	apiVersion string
	uid        types.UID
}

// namespacedChildLists are lists of every kind of namespaced child a Pipeline can have, by kind.
func namespacedChildLists() map[string]client.ObjectList {
	return map[string]client.ObjectList{
		"Deployment":              &appsv1.DeploymentList{},
		"Service":                 &corev1.ServiceList{},
		"PersistentVolumeClaim":   &corev1.PersistentVolumeClaimList{},
		"ConfigMap":               &corev1.ConfigMapList{},
		"PodDisruptionBudget":     &policyv1.PodDisruptionBudgetList{},
		"HorizontalPodAutoscaler": &autoscalingv2.HorizontalPodAutoscalerList{},
		"Ingress":                 &networkingv1.IngressList{},
		"NetworkPolicy":           &networkingv1.NetworkPolicyList{},
	}
}

// controlledBy lists the objects of namespace ns whose controller is the Pipeline of UID uid,
// as "<kind> <name>".
func controlledBy(ctx context.Context, g Gomega, ns string, uid types.UID) map[string]childRef {
	out := map[string]childRef{}
	for kind, list := range namespacedChildLists() {
		g.Expect(admin.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		objs, err := meta.ExtractList(list)
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			obj, ok := o.(client.Object)
			g.Expect(ok).To(BeTrue())
			if ref := metav1.GetControllerOf(obj); ref != nil && ref.UID == uid {
				out[kind+" "+obj.GetName()] = childRef{apiVersion: ref.APIVersion, uid: obj.GetUID()}
			}
		}
	}
	return out
}

// setPipelineVersionServed makes the Pipeline CRD serve version, or stop serving it, and waits
// until the apiserver's discovery says so.
func setPipelineVersionServed(ctx context.Context, version string, served bool) {
	GinkgoHelper()
	Eventually(func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := admin.Get(ctx, client.ObjectKey{Name: pipelineCRD}, crd); err != nil {
			return err
		}
		found := false
		for i := range crd.Spec.Versions {
			if crd.Spec.Versions[i].Name == version {
				crd.Spec.Versions[i].Served, found = served, true
			}
		}
		if !found {
			return StopTrying("the Pipeline CRD has no version " + version)
		}
		return admin.Update(ctx, crd)
	}).Should(Succeed())
	// The group version stays in discovery while it serves the ModelStorageClass: look for pipelines.
	Eventually(func() bool {
		list, err := clientset.Discovery().ServerResourcesForGroupVersion(pipelinev1.GroupVersion.Group + "/" + version)
		if err != nil {
			return false
		}
		return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "pipelines" })
	}).Should(Equal(served), "discovery serves %s/%s pipelines: %t", pipelinev1.GroupVersion.Group, version, served)
}

// Once v1beta1 is no longer served, the garbage collector of kube-controller-manager can only
// follow owner references that name v1: those naming v1beta1 no longer resolve, and a deleted
// Pipeline's children would stay forever. Serial: the other specs create Pipelines in v1beta1.
var _ = Describe("Garbage collection once the Pipeline CRD no longer serves v1beta1", Ordered, Serial, func() {
	It("removes the children of a deleted Pipeline through their owner references, and leaves another Pipeline's alone", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		collected := createSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Name = "collected"
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter}
		})
		kept := createSample(ctx, ns, func(p *pipelinev1.Pipeline) { p.Name = "kept" })
		for _, p := range []*pipelinev1.Pipeline{collected, kept} {
			Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		}

		By("every child's controller reference names the Pipeline in v1")
		collectedChildren := controlledBy(ctx, Default, ns, collected.UID)
		keptChildren := controlledBy(ctx, Default, ns, kept.UID)
		for _, c := range []struct {
			p        *pipelinev1.Pipeline
			children map[string]childRef
		}{{collected, collectedChildren}, {kept, keptChildren}} {
			p, children := c.p, c.children
			st := get(ctx, p).Status
			Expect(children).To(HaveKey("PersistentVolumeClaim "+st.Storage.ClaimName), "%s", p.Name)
			for _, s := range st.Steps {
				Expect(children).To(And(HaveKey("Deployment "+s.DeploymentName), HaveKey("Service "+s.DeploymentName)), "%s", p.Name)
			}
			Expect(children).To(HaveKey("NetworkPolicy "+resources.StepsNetworkPolicyName(p)), "%s", p.Name)
			for name, ref := range children {
				Expect(ref.apiVersion).To(Equal(pipelinev1.GroupVersion.String()), "%s of Pipeline %s", name, p.Name)
			}
		}
		Expect(collectedChildren).To(And(
			HaveKey("Deployment "+resources.RouterObjectName(collected)), HaveKey("ConfigMap "+resources.RouterObjectName(collected)),
			HaveKey("PodDisruptionBudget "+resources.RouterObjectName(collected))))

		By("the Pipeline CRD serves v1 alone, and kube-controller-manager has had the time to notice")
		DeferCleanup(func(ctx context.Context) {
			setPipelineVersionServed(ctx, pipelinev1beta1.GroupVersion.Version, true)
			Eventually(func() error { return admin.List(ctx, &pipelinev1beta1.PipelineList{}) }).Should(Succeed(), "v1beta1 is served again")
		})
		setPipelineVersionServed(ctx, pipelinev1beta1.GroupVersion.Version, false)
		time.Sleep(gcForgetsVersions)

		By("deleting one Pipeline: the operator removes its volume, the garbage collector its namespaced children")
		pv := get(ctx, collected).Status.Storage.VolumeName
		Expect(pv).NotTo(BeEmpty())
		Expect(admin.Delete(ctx, collected)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(collected), &pipelinev1.Pipeline{}))
		}).Should(BeTrue())
		Eventually(func(g Gomega) {
			g.Expect(controlledBy(ctx, g, ns, collected.UID)).To(BeEmpty())
			selector := client.MatchingLabels{resources.LabelPipeline: collected.Name}
			replicaSets := &appsv1.ReplicaSetList{}
			g.Expect(admin.List(ctx, replicaSets, client.InNamespace(ns), selector)).To(Succeed())
			g.Expect(replicaSets.Items).To(BeEmpty())
			pods := &corev1.PodList{}
			g.Expect(admin.List(ctx, pods, client.InNamespace(ns), selector)).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
			g.Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Name: pv}, &corev1.PersistentVolume{}))).To(BeTrue())
		}).Should(Succeed())

		By("the other Pipeline keeps every child, the same objects")
		Consistently(func(g Gomega) map[string]childRef { return controlledBy(ctx, g, ns, kept.UID) }, "5s").Should(Equal(keptChildren))
		Expect(phaseOf(ctx, kept)()).To(Equal(pipelinev1.PipelinePhaseRunning))
	})
})
