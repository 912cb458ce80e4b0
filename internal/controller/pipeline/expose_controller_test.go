package pipeline

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func ingressOf(ctx context.Context, p *pipelinev1.Pipeline) *networkingv1.Ingress {
	GinkgoHelper()
	return child(ctx, &networkingv1.Ingress{}, p.Namespace, resources.IngressName(p))
}

// publishAddress plays an ingress controller: it publishes an address for the Ingress of p.
func publishAddress(ctx context.Context, p *pipelinev1.Pipeline, ip string) {
	GinkgoHelper()
	Eventually(func() error {
		ing := ingressOf(ctx, p)
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: ip}}
		return k8sClient.Status().Update(ctx, ing)
	}).Should(Succeed())
}

// entryStatus is what the status says about reaching the entry step.
type entryStatus struct {
	URL          string
	NodePort     int32
	IngressState pipelinev1.IngressState
}

func entryOf(ctx context.Context, p *pipelinev1.Pipeline) func() entryStatus {
	return func() entryStatus {
		st := getPipeline(ctx, p).Status
		return entryStatus{URL: st.URL, NodePort: st.NodePort, IngressState: st.IngressState}
	}
}

var _ = Describe("Exposing the entry step", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("gives the entry step's Service the type expose asks for, and returns it to ClusterIP", func() {
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeNodePort}
		})

		By("opening a node port for the entry step only")
		entry := serviceOf(ctx, p, 0)
		Expect(entry.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
		nodePort := entry.Spec.Ports[0].NodePort
		Expect(nodePort).NotTo(BeZero())
		Expect(serviceOf(ctx, p, 1).Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
		Eventually(entryOf(ctx, p)).Should(Equal(entryStatus{NodePort: nodePort}))

		By("asking for a load balancer, whose address becomes the URL once published")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Expose.ServiceType = pipelinev1.ServiceTypeLoadBalancer
		})
		Eventually(func() corev1.ServiceType { return serviceOf(ctx, p, 0).Spec.Type }).Should(Equal(corev1.ServiceTypeLoadBalancer))
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning), "running does not wait for an external address")
		Expect(getPipeline(ctx, p).Status.URL).To(BeEmpty())
		Eventually(func() error {
			svc := serviceOf(ctx, p, 0)
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}
			return k8sClient.Status().Update(ctx, svc)
		}).Should(Succeed())
		Eventually(entryOf(ctx, p)).Should(Equal(entryStatus{URL: "http://203.0.113.7:9080", NodePort: nodePort}))

		By("returning to ClusterIP, which drops the node port")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Expose.ServiceType = pipelinev1.ServiceTypeClusterIP
		})
		Eventually(func(g Gomega) {
			svc := serviceOf(ctx, p, 0)
			g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
			g.Expect(svc.Spec.Ports).To(HaveLen(1))
			g.Expect(svc.Spec.Ports[0].NodePort).To(BeZero())
			g.Expect(svc.Spec.Ports[0].Port).To(Equal(int32(9080)))
		}).Should(Succeed())
		Eventually(entryOf(ctx, p)).Should(Equal(entryStatus{}))
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	})

	It("creates, updates, repairs and removes the entry step's Ingress", func() {
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "infer.example.com", ClassName: "nginx"}}
		})

		By("defaulting the path, its type and the Service type at admission")
		Expect(p.Spec.Expose.ServiceType).To(Equal(pipelinev1.ServiceTypeClusterIP))
		Expect(p.Spec.Expose.Ingress.Path).To(Equal("/"))
		Expect(p.Spec.Expose.Ingress.PathType).To(Equal(pipelinev1.IngressPathTypePrefix))

		By("creating an Ingress owned by the Pipeline that routes to the entry step")
		ing := ingressOf(ctx, p)
		Expect(ing.Name).To(Equal("facedetection-pipeline"))
		Expect(metav1.IsControlledBy(ing, p)).To(BeTrue())
		Expect(ing.Labels).To(HaveKeyWithValue(resources.LabelManagedBy, resources.ManagedBy))
		Expect(ing.Labels).To(HaveKeyWithValue(resources.LabelPipeline, p.Name))
		Expect(ing.Spec.IngressClassName).To(Equal(ptr.To("nginx")))
		Expect(ing.Spec.TLS).To(BeEmpty())
		Expect(ing.Spec.Rules).To(Equal([]networkingv1.IngressRule{{Host: "infer.example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: resources.StepObjectName(p, 0), Port: networkingv1.ServiceBackendPort{Number: 9080}}},
			}}}},
		}}))
		Eventually(entryOf(ctx, p)).Should(Equal(entryStatus{URL: "http://infer.example.com/",
			IngressState: pipelinev1.IngressStatePending}))
		Expect(getPipeline(ctx, p).Status.Phase).To(Equal(pipelinev1.PipelinePhaseRunning))

		By("following a change of host and path, with TLS")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Expose.Ingress = &pipelinev1.IngressExpose{Host: "detect.example.com", Path: "/detect",
				PathType: pipelinev1.IngressPathTypeExact, TLSSecretName: "detect-tls"}
		})
		Eventually(func(g Gomega) {
			ing := ingressOf(ctx, p)
			g.Expect(ing.Spec.Rules).To(HaveLen(1))
			g.Expect(ing.Spec.Rules[0].Host).To(Equal("detect.example.com"))
			g.Expect(ing.Spec.Rules[0].HTTP.Paths).To(HaveLen(1))
			g.Expect(ing.Spec.Rules[0].HTTP.Paths[0].Path).To(Equal("/detect"))
			g.Expect(ing.Spec.Rules[0].HTTP.Paths[0].PathType).To(Equal(ptr.To(networkingv1.PathTypeExact)))
			g.Expect(ing.Spec.TLS).To(Equal([]networkingv1.IngressTLS{{Hosts: []string{"detect.example.com"}, SecretName: "detect-tls"}}))
			g.Expect(ing.Spec.IngressClassName).To(BeNil(), "the class the spec dropped is removed")
		}).Should(Succeed())
		Eventually(entryOf(ctx, p)).Should(Equal(entryStatus{URL: "https://detect.example.com/detect",
			IngressState: pipelinev1.IngressStatePending}))

		By("restoring an edited rule and leaving alone the annotations of others")
		ing = ingressOf(ctx, p)
		ing.Spec.Rules[0].Host = "edited.example.com"
		ing.Annotations = map[string]string{"nginx.ingress.kubernetes.io/proxy-body-size": "64m"}
		Expect(k8sClient.Update(ctx, ing, client.FieldOwner("kubectl-edit"))).To(Succeed())
		Eventually(func() string { return ingressOf(ctx, p).Spec.Rules[0].Host }).Should(Equal("detect.example.com"))
		Expect(ingressOf(ctx, p).Annotations).To(HaveKeyWithValue("nginx.ingress.kubernetes.io/proxy-body-size", "64m"))
		Eventually(eventNotes(ctx, p)).Should(ContainElement("Updated: Updated Ingress " + ing.Name))

		By("recreating a deleted Ingress")
		Expect(k8sClient.Delete(ctx, ing)).To(Succeed())
		Eventually(func() types.UID { return ingressOf(ctx, p).UID }).ShouldNot(Equal(ing.UID))

		By("keeping other Ingresses out of the cache")
		foreign := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Name: "not-ours", Namespace: ns, Labels: map[string]string{resources.LabelPipeline: p.Name}},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "x", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
		}
		Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
		cachedNames := func() []string {
			cached := &networkingv1.IngressList{}
			Expect(mgrCache.List(ctx, cached, client.InNamespace(ns))).To(Succeed())
			var names []string
			for _, i := range cached.Items {
				names = append(names, i.Name)
			}
			return names
		}
		// The recreated Ingress reaches the cache a moment after the apiserver has it.
		Eventually(cachedNames).Should(ConsistOf(resources.IngressName(p)))
		Consistently(cachedNames).Should(ConsistOf(resources.IngressName(p)))

		By("reporting the address the ingress controller publishes when there is no host")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Expose.Ingress = &pipelinev1.IngressExpose{Path: "/v1"}
		})
		Eventually(func() string { return ingressOf(ctx, p).Spec.Rules[0].Host }).Should(BeEmpty())
		Eventually(entryOf(ctx, p)).Should(Equal(entryStatus{IngressState: pipelinev1.IngressStatePending}))
		publishAddress(ctx, p, "198.51.100.4")
		Eventually(entryOf(ctx, p)).Should(Equal(entryStatus{URL: "http://198.51.100.4/v1",
			IngressState: pipelinev1.IngressStateReady}))

		By("deleting the Ingress when the spec drops it")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Expose = nil })
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: resources.IngressName(p)}, &networkingv1.Ingress{}))
		}).Should(BeTrue())
		Eventually(eventNotes(ctx, p)).Should(ContainElement("Deleted: Deleted Ingress " + resources.IngressName(p)))
		Eventually(entryOf(ctx, p)).Should(Equal(entryStatus{}))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(foreign), foreign)).To(Succeed(), "an Ingress it does not own stays")
	})

	It("makes no write at all when it reconciles a converged exposed Pipeline again", func() {
		p := runningSample(ctx, ns, func(p *pipelinev1.Pipeline) {
			p.Spec.Expose = &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeLoadBalancer,
				Ingress: &pipelinev1.IngressExpose{Host: "infer.example.com", TLSSecretName: "infer-tls"}}
		})
		publishAddress(ctx, p, "198.51.100.4")
		Eventually(func() pipelinev1.IngressState { return getPipeline(ctx, p).Status.IngressState }).
			Should(Equal(pipelinev1.IngressStateReady))
		p = getPipeline(ctx, p)
		Consistently(func() string { return getPipeline(ctx, p).ResourceVersion }).Should(Equal(p.ResourceVersion))

		// The Pipeline reconciler test shows that the counter sees the writes of a pass that makes any.
		expectNoWritesOnReconcile(ctx, p)
	})

	DescribeTable("refuses an invalid expose at admission with a specific message",
		func(expose pipelinev1.Expose, message string) {
			p := testenv.Sample(GinkgoT(), ns)
			p.UID = ""
			p.Spec.Expose = &expose
			err := k8sClient.Create(ctx, p)
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), err.Error())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("an unknown Service type", pipelinev1.Expose{ServiceType: "ExternalName"}, `Unsupported value: "ExternalName"`),
		Entry("TLS without a host", pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{TLSSecretName: "tls"}},
			"ingress.tlsSecretName needs ingress.host"),
		Entry("a host that is no DNS name", pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "Infer_Example.com"}},
			"ingress.host must be a DNS name (a DNS-1123 subdomain"),
		Entry("a wildcard host", pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "*.example.com"}},
			"ingress.host must be a DNS name (a DNS-1123 subdomain"),
		Entry("an IP address as host", pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "192.168.20.235"}},
			"ingress.host must be a DNS name, not an IP address"),
		Entry("a relative path", pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Path: "detect"}},
			"ingress.path must start with '/'"),
		Entry("a path with '..'", pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Path: "/a/../b"}},
			"ingress.path must not contain '//', '.' or '..' segments"),
		Entry("a path with a query", pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Path: "/a?b=c"}},
			"ingress.path must not contain spaces, '?' or '#'"),
		Entry("an unknown path type", pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{PathType: "ImplementationSpecific"}},
			`Unsupported value: "ImplementationSpecific"`),
	)
})
