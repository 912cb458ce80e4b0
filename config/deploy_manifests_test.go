package config

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	operatormanager "github.com/ndsl-cn/pipeline-operator/internal/manager"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/router"
	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// pipelineCRD is the CustomResourceDefinition of Pipelines.
const pipelineCRD = "pipelines.distri-infer.ndsl.cn"

var _ = Describe("The manifests of make deploy", Ordered, func() {
	const ns = "pipeline-operator-system"
	var (
		ctx     context.Context
		objs    []*unstructured.Unstructured
		manager *appsv1.Deployment
	)
	BeforeAll(func() {
		ctx = context.Background()
		objs = deployManifests("default")
		manager = the[appsv1.Deployment](objs, "Deployment", "pipeline-operator-controller-manager")
	})

	It("are all accepted by the apiserver", func() {
		// Applied, not created: other specs may have made the namespace already (without its labels).
		for _, u := range objs {
			if u.GetKind() == "Namespace" {
				Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
					client.FieldOwner("manifest-test"), client.ForceOwnership)).To(Succeed())
			}
		}
		for _, u := range objs {
			// The suite's CRDs point at the suite's server by URL, which a Service in the same
			// object cannot join: make test-e2e applies these.
			if u.GetKind() == "Namespace" || u.GetKind() == "CustomResourceDefinition" {
				continue
			}
			Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
				client.FieldOwner("manifest-test"), client.ForceOwnership, client.DryRunAll)).
				To(Succeed(), "%s %s", u.GetKind(), u.GetName())
		}
	})

	It("run the manager's pod in its namespace, which enforces the restricted Pod Security level", func() {
		namespace := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, namespace)).To(Succeed())
		Expect(namespace.Labels).To(HaveKeyWithValue(resources.LabelPodSecurityEnforce, string(resources.PodSecurityRestricted)))

		pod := func(template corev1.PodTemplateSpec) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "manager-", Namespace: ns, Labels: template.Labels}, Spec: template.Spec}
		}
		Expect(k8sClient.Create(ctx, pod(manager.Spec.Template), client.DryRunAll)).To(Succeed())

		By("refusing the same pod without runAsNonRoot: the level is really enforced")
		weaker := manager.Spec.Template.DeepCopy()
		weaker.Spec.SecurityContext.RunAsNonRoot = nil
		err := k8sClient.Create(ctx, pod(*weaker), client.DryRunAll)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	})

	It("run Pipeline routers from the manager's own image", func() {
		c := manager.Spec.Template.Spec.Containers[0]
		var routerImage string
		for _, e := range c.Env {
			if e.Name == resources.EnvRouterImage {
				routerImage = e.Value
			}
		}
		Expect(routerImage).To(Equal(c.Image), "%s follows the manager's image", resources.EnvRouterImage)
	})

	It("give the manager a read-only root filesystem and bounded resources", func() {
		c := manager.Spec.Template.Spec.Containers[0]
		Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			Expect(c.Resources.Requests).To(HaveKey(r))
			Expect(c.Resources.Limits).To(HaveKey(r))
		}
	})

	It("run two replicas that a drain cannot both take, with the Go runtime's limit below the container's", func() {
		Expect(manager.Spec.Replicas).To(HaveValue(BeNumerically(">=", 2)), "one reconciles, all serve the webhooks")
		budget := the[policyv1.PodDisruptionBudget](objs, "PodDisruptionBudget", "pipeline-operator-controller-manager")
		Expect(budget.Spec.MinAvailable).To(HaveValue(Equal(intstr.FromInt32(1))))
		selector, err := metav1.LabelSelectorAsSelector(budget.Spec.Selector)
		Expect(err).NotTo(HaveOccurred())
		Expect(selector.Matches(labels.Set(manager.Spec.Template.Labels))).To(BeTrue(), "the budget selects the manager's pods")

		c := manager.Spec.Template.Spec.Containers[0]
		var limit *corev1.ResourceFieldSelector
		for _, e := range c.Env {
			if e.Name == operatormanager.EnvMemoryLimit && e.ValueFrom != nil {
				limit = e.ValueFrom.ResourceFieldRef
			}
		}
		Expect(limit).NotTo(BeNil(), "%s comes from the container's limit", operatormanager.EnvMemoryLimit)
		Expect(limit.ContainerName).To(Equal(c.Name))
		Expect(limit.Resource).To(Equal("limits.memory"))
		Expect(limit.Divisor.IsZero() || limit.Divisor.Value() == 1).To(BeTrue(), "in bytes")
	})

	It("convert Pipelines through the webhook Service at /convert, the CRD receiving the CA the manager keeps", func() {
		crd := the[apiextensionsv1.CustomResourceDefinition](objs, "CustomResourceDefinition", pipelineCRD)
		Expect(crd.Spec.Conversion).NotTo(BeNil())
		Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.WebhookConverter))
		service := the[corev1.Service](objs, "Service", "pipeline-operator-webhook-service")
		Expect(crd.Spec.Conversion.Webhook.ClientConfig.Service).To(HaveValue(And(
			HaveField("Name", service.Name), HaveField("Namespace", service.Namespace), HaveField("Path", HaveValue(Equal("/convert"))))))
		Expect(service.Spec.Ports).To(ContainElement(HaveField("Port", BeEquivalentTo(443))), "the apiserver calls port 443 of the Service")

		injector := the[rbacv1.ClusterRole](objs, "ClusterRole", "pipeline-operator-webhook-cert-injector-role")
		Expect(injector.Rules).To(ContainElement(And(HaveField("Resources", ContainElement("customresourcedefinitions")),
			HaveField("ResourceNames", ConsistOf(pipelineCRD)), HaveField("Verbs", ConsistOf("update")))),
			"the manager may write the CA into the Pipeline CRD, and no other")
	})

	It("let only labelled namespaces reach the metrics port, and anyone the webhook port (the apiserver alone with the overlay)", func() {
		podLabels := labels.Set(manager.Spec.Template.Labels)
		selects := func(np *networkingv1.NetworkPolicy) bool {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			Expect(err).NotTo(HaveOccurred())
			return sel.Matches(podLabels)
		}
		port := func(p int) []networkingv1.NetworkPolicyPort {
			return []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt(p))}}
		}

		metrics := the[networkingv1.NetworkPolicy](objs, "NetworkPolicy", "pipeline-operator-allow-metrics-traffic")
		Expect(selects(metrics)).To(BeTrue(), "the policy selects the manager's pod")
		Expect(metrics.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
		Expect(metrics.Spec.Ingress).To(Equal([]networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"metrics": "enabled"}}}},
			Ports: port(8443),
		}}))
		service := the[corev1.Service](objs, "Service", "pipeline-operator-controller-manager-metrics-service")
		Expect(service.Spec.Ports[0].TargetPort).To(Equal(intstr.FromInt(8443)), "the policy opens the port the metrics Service targets")
		Expect(manager.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--metrics-bind-address=:8443"))

		webhook := the[networkingv1.NetworkPolicy](objs, "NetworkPolicy", "pipeline-operator-allow-webhook-traffic")
		Expect(selects(webhook)).To(BeTrue(), "the policy selects the manager's pod")
		Expect(webhook.Spec.Ingress).To(Equal([]networkingv1.NetworkPolicyIngressRule{{Ports: port(9443)}}), "from any source")

		// The overlay for clusters whose apiserver address is known lets only that address in.
		overlay := the[networkingv1.NetworkPolicy](deployManifests(filepath.Join("overlays", "webhook-from-apiserver")),
			"NetworkPolicy", "pipeline-operator-allow-webhook-traffic")
		Expect(selects(overlay)).To(BeTrue(), "the policy selects the manager's pod")
		Expect(overlay.Spec.Ingress).To(Equal([]networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/28"}}},
			Ports: port(9443),
		}}), "from the apiserver's addresses only: no pod or namespace selector")
	})
})

var _ = Describe("The cert-manager overlay of make deploy", func() {
	It("serves the certificate cert-manager issues for the webhook Service and injects its CA", func() {
		objs := deployManifests(filepath.Join("overlays", "cert-manager"))
		cert := the[unstructured.Unstructured](objs, "Certificate", "pipeline-operator-serving-cert")
		Expect(cert.GetNamespace()).To(Equal("pipeline-operator-system"))
		secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		the[unstructured.Unstructured](objs, "Issuer", issuer)

		service := the[corev1.Service](objs, "Service", "pipeline-operator-webhook-service")
		Expect(dnsNames).To(ContainElement(service.Name + "." + service.Namespace + ".svc"))

		manager := the[appsv1.Deployment](objs, "Deployment", "pipeline-operator-controller-manager")
		var mounted string
		for _, v := range manager.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == secretName {
				mounted = v.Name
			}
		}
		Expect(mounted).NotTo(BeEmpty(), "the manager mounts the Secret %s", secretName)
		Expect(manager.Spec.Template.Spec.Containers[0].VolumeMounts).To(ContainElement(And(
			HaveField("Name", mounted), HaveField("MountPath", "/tmp/k8s-webhook-server/serving-certs"))),
			"mounted where the manager looks for a certificate first (--webhook-cert-dir)")

		inject := cert.GetNamespace() + "/" + cert.GetName()
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			found := false
			for _, u := range objs {
				if u.GetKind() == kind {
					found = true
					Expect(u.GetAnnotations()).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", inject), u.GetName())
				}
			}
			Expect(found).To(BeTrue(), "the overlay keeps the %s", kind)
		}
		crd := the[unstructured.Unstructured](objs, "CustomResourceDefinition", pipelineCRD)
		Expect(crd.GetAnnotations()).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", inject),
			"the CA reaches the conversion webhook too")
	})
})

// serviceMonitor and podMonitor are the fields of the Prometheus Operator's monitors the tests
// read (the monitoring.coreos.com types are not a dependency of this module).
type (
	serviceMonitor struct {
		Spec struct {
			Endpoints []struct {
				Scheme      string    `json:"scheme"`
				HonorLabels bool      `json:"honorLabels"`
				TLSConfig   tlsConfig `json:"tlsConfig"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	tlsConfig struct {
		InsecureSkipVerify *bool  `json:"insecureSkipVerify"`
		ServerName         string `json:"serverName"`
		CA                 struct {
			Secret *corev1.SecretKeySelector `json:"secret"`
		} `json:"ca"`
	}
	podMonitor struct {
		Spec struct {
			PodTargetLabels       []string `json:"podTargetLabels"`
			SampleLimit           *uint64  `json:"sampleLimit"`
			TargetLimit           *uint64  `json:"targetLimit"`
			LabelLimit            *uint64  `json:"labelLimit"`
			LabelNameLengthLimit  *uint64  `json:"labelNameLengthLimit"`
			LabelValueLengthLimit *uint64  `json:"labelValueLengthLimit"`
			PodMetricsEndpoints   []struct {
				Port              string `json:"port"`
				HonorLabels       bool   `json:"honorLabels"`
				MetricRelabelings []struct {
					SourceLabels []string `json:"sourceLabels"`
					Regex        string   `json:"regex"`
					Action       string   `json:"action"`
				} `json:"metricRelabelings"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
)

// expectKeepsOwnCertificate checks that the manager of the make deploy manifests objs keeps its
// own certificate in the Secret secretName of namespace ns and serves it on the metrics endpoint:
// no certificate is mounted for the webhooks or named for the metrics, the manager knows its
// namespace, and its Role lets it create the Secret and write it.
func expectKeepsOwnCertificate(objs []*unstructured.Unstructured, secretName, ns string) {
	GinkgoHelper()
	manager := the[appsv1.Deployment](objs, "Deployment", "pipeline-operator-controller-manager")
	Expect(manager.Namespace).To(Equal(ns))
	for _, v := range manager.Spec.Template.Spec.Volumes {
		Expect(v.Secret).To(BeNil(), "no certificate is mounted: the manager makes its own")
	}
	c := manager.Spec.Template.Spec.Containers[0]
	for _, a := range c.Args {
		Expect(a).NotTo(HavePrefix("--metrics-cert-dir"), "the metrics endpoint serves the webhook certificate")
		Expect(a).NotTo(HavePrefix("--metrics-service-name"))
		Expect(a).NotTo(HavePrefix("--webhook-secret-name"))
		Expect(a).NotTo(HavePrefix("--enable-webhooks"))
	}
	Expect(c.Env).To(ContainElement(HaveField("Name", "POD_NAMESPACE")))

	role := the[rbacv1.Role](objs, "Role", "pipeline-operator-webhook-cert-role")
	Expect(role.Namespace).To(Equal(ns))
	Expect(role.Rules).To(ContainElement(And(HaveField("Resources", ContainElement("secrets")), HaveField("Verbs", ContainElement("create")))))
	Expect(role.Rules).To(ContainElement(And(HaveField("ResourceNames", ContainElement(secretName)),
		HaveField("Verbs", ContainElement("update")))), "the manager may write the Secret %s", secretName)
}

// expectServesCertManagerCertificate checks that the cert-manager overlay's manifests objs have
// cert-manager issue a certificate for serverName into the Secret secretName, and the manager
// serve it on the metrics endpoint: mounted where --metrics-cert-dir says.
func expectServesCertManagerCertificate(objs []*unstructured.Unstructured, secretName, serverName string) {
	GinkgoHelper()
	var cert *unstructured.Unstructured
	for _, u := range objs {
		if name, _, _ := unstructured.NestedString(u.Object, "spec", "secretName"); u.GetKind() == "Certificate" && name == secretName {
			cert = u
		}
	}
	Expect(cert).NotTo(BeNil(), "cert-manager issues a certificate into %s", secretName)
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	Expect(dnsNames).To(ContainElement(serverName))

	manager := the[appsv1.Deployment](objs, "Deployment", "pipeline-operator-controller-manager")
	Expect(cert.GetNamespace()).To(Equal(manager.Namespace), "the Secret is in the namespace of the ServiceMonitor")
	c := manager.Spec.Template.Spec.Containers[0]
	var volume string
	for _, v := range manager.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secretName {
			volume = v.Name
		}
	}
	Expect(volume).NotTo(BeEmpty(), "the manager mounts the Secret %s", secretName)
	var certDir string
	for _, a := range c.Args {
		if dir, ok := strings.CutPrefix(a, "--metrics-cert-dir="); ok {
			certDir = dir
		}
	}
	Expect(c.VolumeMounts).To(ContainElement(And(HaveField("Name", volume), HaveField("MountPath", certDir))),
		"mounted where --metrics-cert-dir says")
}

// skipsVerification is every object of objs whose YAML turns TLS verification off.
func skipsVerification(objs []*unstructured.Unstructured) []string {
	GinkgoHelper()
	var found []string
	for _, u := range objs {
		data, err := yaml.Marshal(u.Object)
		Expect(err).NotTo(HaveOccurred())
		if regexp.MustCompile(`insecureSkipVerify:\s*true`).Match(data) {
			found = append(found, u.GetKind()+" "+u.GetName())
		}
	}
	return found
}

var _ = Describe("The Prometheus Operator manifests", func() {
	It("verify the manager's metrics certificate with the CA of the Secret either deployment keeps it in", func() {
		monitors := deployManifests("prometheus")
		Expect(skipsVerification(monitors)).To(BeEmpty(), "no monitor of config/prometheus skips TLS verification")
		endpoints := the[serviceMonitor](monitors, "ServiceMonitor", "pipeline-operator-controller-manager-metrics-monitor").Spec.Endpoints
		Expect(endpoints).To(HaveLen(1))
		Expect(endpoints[0].Scheme).To(Equal("https"))
		Expect(endpoints[0].HonorLabels).To(BeTrue(),
			"the per-Pipeline series keep their namespace label, which the alerts and dashboard read")
		tls := endpoints[0].TLSConfig
		Expect(tls.InsecureSkipVerify).To(BeNil())

		By("naming the metrics Service of make deploy")
		deployed := deployManifests("default")
		service := the[corev1.Service](deployed, "Service", "pipeline-operator-controller-manager-metrics-service")
		Expect(tls.ServerName).To(Equal(service.Name + "." + service.Namespace + ".svc"))
		Expect(tls.CA.Secret).NotTo(BeNil())
		Expect(tls.CA.Secret.Key).To(Equal("ca.crt"))

		By("taking the CA from the Secret the manager of config/default creates and serves on the metrics endpoint")
		// cmd/main.go's defaults: --webhook-secret-name and --metrics-service-name.
		Expect(tls.CA.Secret.Name).To(Equal("pipeline-operator-webhook-server-cert"))
		Expect(service.Name).To(Equal("pipeline-operator-controller-manager-metrics-service"))
		expectKeepsOwnCertificate(deployed, tls.CA.Secret.Name, service.Namespace)

		By("and from the Secret cert-manager issues the certificate of the cert-manager overlay into")
		expectServesCertManagerCertificate(deployManifests(filepath.Join("overlays", "cert-manager")), tls.CA.Secret.Name, tls.ServerName)
	})

	It("skip verification only in the opt-in overlay for a manager whose certificate cannot be verified", func() {
		for _, dir := range []string{"default", filepath.Join("overlays", "cert-manager")} {
			Expect(skipsVerification(deployManifests(dir))).To(BeEmpty(), dir)
		}
		Expect(skipsVerification(deployManifests(filepath.Join("overlays", "prometheus-insecure-metrics")))).
			To(Equal([]string{"ServiceMonitor pipeline-operator-controller-manager-metrics-monitor"}))
	})

	It("scrape only the routers' own series, within bounds that a router of 64 steps fits in", func() {
		pm := the[podMonitor](deployManifests("prometheus"), "PodMonitor", "pipeline-operator-router-metrics-monitor").Spec
		Expect(pm.PodTargetLabels).To(Equal([]string{"pipeline"}), "no pod label but pipeline is copied")
		for name, limit := range map[string]*uint64{"sampleLimit": pm.SampleLimit, "targetLimit": pm.TargetLimit,
			"labelLimit": pm.LabelLimit, "labelNameLengthLimit": pm.LabelNameLengthLimit,
			"labelValueLengthLimit": pm.LabelValueLengthLimit} {
			Expect(limit).To(HaveValue(BeNumerically(">", 0)), name)
		}
		Expect(pm.PodMetricsEndpoints).To(HaveLen(1))
		endpoint := pm.PodMetricsEndpoints[0]
		Expect(endpoint.HonorLabels).To(BeFalse(), "a scraped label never overrides the target's namespace or pod")
		Expect(endpoint.MetricRelabelings).To(HaveLen(1))
		keep := endpoint.MetricRelabelings[0]
		Expect(keep.Action).To(Equal("keep"))
		Expect(keep.SourceLabels).To(Equal([]string{"__name__"}))
		kept := regexp.MustCompile("^(?:" + keep.Regex + ")$") // Prometheus anchors relabeling regexes

		By("keeping every series of a router of 64 steps, dropping the Go runtime's and the process's")
		cfg := routerconfig.Config{Pipeline: "team-a/faces"}
		for i := range 64 {
			// Never called: the router only needs the URLs to be valid.
			cfg.Steps = append(cfg.Steps, routerconfig.Step{Name: fmt.Sprintf("step-%d", i+1), URL: "http://127.0.0.1:1/"})
		}
		r, err := router.New(cfg, router.Options{})
		Expect(err).NotTo(HaveOccurred())
		families, err := r.Gatherer().Gather()
		Expect(err).NotTo(HaveOccurred())
		samples, maxLabels, dropped := 0, 0, 0
		for _, f := range families {
			if !strings.HasPrefix(f.GetName(), "pipeline_router_") {
				Expect(kept.MatchString(f.GetName())).To(BeFalse(), f.GetName())
				dropped++
				continue
			}
			Expect(kept.MatchString(f.GetName())).To(BeTrue(), f.GetName())
			for _, m := range f.GetMetric() {
				n, labels := 1, len(m.GetLabel())+1 // the series, and __name__
				if h := m.GetHistogram(); h != nil {
					n, labels = len(h.GetBucket())+3, labels+1 // buckets, +Inf, sum, count; le
				}
				samples += n
				maxLabels = max(maxLabels, labels)
			}
		}
		Expect(dropped).To(BeNumerically(">", 0), "the router also exports the Go runtime's metrics")
		// At start each step has 3 of the 9 error reasons; every reason and 20 status codes may come.
		Expect(*pm.SampleLimit).To(BeNumerically(">=", samples+64*6+20))
		// The target's labels: job, instance, namespace, pod, container, endpoint and pipeline.
		Expect(*pm.LabelLimit).To(BeNumerically(">=", maxLabels+7))
		Expect(*pm.LabelNameLengthLimit).To(BeNumerically(">=", len("__name__")))
		Expect(*pm.LabelValueLengthLimit).To(BeNumerically(">=", 253), "a pod's name, up to 253 characters")
	})
})
