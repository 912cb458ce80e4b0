package manager

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/leaderelection"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The ValidatingAdmissionPolicy of config/policy binds the operator's own identity to what it
// makes, so that a manager whose code or token is taken still cannot run pods under another
// ServiceAccount, on the host's namespaces, with a node's files, beyond the Pod Security
// baseline level or on the control plane, nor make a hostPath volume, a volume with a CSI
// driver's Secret or one reserved for another namespace's claim.
var _ = Describe("The guard on the operator's identity", Ordered, func() {
	var (
		labelPolicy *admissionregistrationv1.ValidatingAdmissionPolicy
		operator    client.Client
		ns          string
		p           = testenv.RoutedSample(GinkgoT())
		// operatorNamespace is the manager's namespace, operatorServiceAccount its ServiceAccount
		// and operatorUser that ServiceAccount's user name.
		operatorNamespace, operatorServiceAccount, operatorUser string
		// variants is the namespace of the variants of p the tests store (stored); class is a
		// ModelStorageClass that selects it; classed and inline are Pipelines there whose storage
		// is that class and an inline CSI volume.
		variants        string
		class           *pipelinev1.ModelStorageClass
		classed, inline *pipelinev1.Pipeline
	)
	// stored is q created as name in namespace variants (p's own namespace holds p alone, which
	// the operator reconciles in the last test): the guard webhook compares the operator's
	// Services and volumes with the Pipeline the apiserver holds.
	stored := func(ctx context.Context, q *pipelinev1.Pipeline, name string) *pipelinev1.Pipeline {
		GinkgoHelper()
		s := q.DeepCopy()
		s.Name, s.Namespace, s.ResourceVersion, s.UID = name, variants, "", ""
		s.Status = pipelinev1.PipelineStatus{}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		// Gone once the test is over (other suites count the cluster's Pipelines), with the
		// finalizer the operator of the last test may have added and no operator left to remove.
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(k8sClient.Patch(ctx, s, client.RawPatch(types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`))))).To(Succeed())
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, s))).To(Succeed())
		})
		return s
	}

	BeforeAll(func(ctx SpecContext) {
		objs := deployManifests("default")
		sa := the[corev1.ServiceAccount](objs, "ServiceAccount", "pipeline-operator-controller-manager")
		user := fmt.Sprintf("system:serviceaccount:%s:%s", sa.Namespace, sa.Name)
		policy := the[admissionregistrationv1.ValidatingAdmissionPolicy](objs, "ValidatingAdmissionPolicy", "pipeline-operator-guard")
		Expect(policy.Spec.MatchConditions).To(HaveLen(1))
		Expect(policy.Spec.MatchConditions[0].Expression).To(Equal(fmt.Sprintf("request.userInfo.username == '%s'", user)),
			"the policy names the manager's ServiceAccount as config/default makes it")

		labelPolicy = the[admissionregistrationv1.ValidatingAdmissionPolicy](objs, "ValidatingAdmissionPolicy", "pipeline-operator-label-guard")
		Expect(labelPolicy.Spec.MatchConditions[1].Expression).To(ContainSubstring(fmt.Sprintf("request.userInfo.username != '%s'", user)),
			"the label policy names the manager's ServiceAccount as config/default makes it")
		for _, name := range []string{"pipeline-operator-scope-guard", "pipeline-operator-volume-guard", "pipeline-operator-webhook-guard"} {
			guard := the[admissionregistrationv1.ValidatingAdmissionPolicy](objs, "ValidatingAdmissionPolicy", name)
			Expect(guard.Spec.MatchConditions[0].Expression).To(Equal(fmt.Sprintf("request.userInfo.username == '%s'", user)),
				"%s names the manager's ServiceAccount as config/default makes it", name)
		}
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sa.Namespace}}))).To(Succeed())
		for _, o := range []client.Object{
			policy, labelPolicy,
			the[admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs, "ValidatingAdmissionPolicyBinding", "pipeline-operator-label-guard"),
			the[admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs, "ValidatingAdmissionPolicyBinding", "pipeline-operator-guard"),
			the[admissionregistrationv1.ValidatingAdmissionPolicy](objs, "ValidatingAdmissionPolicy", "pipeline-operator-scope-guard"),
			the[admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs, "ValidatingAdmissionPolicyBinding", "pipeline-operator-scope-guard"),
			the[admissionregistrationv1.ValidatingAdmissionPolicy](objs, "ValidatingAdmissionPolicy", "pipeline-operator-volume-guard"),
			the[admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs, "ValidatingAdmissionPolicyBinding", "pipeline-operator-volume-guard"),
			the[admissionregistrationv1.ValidatingAdmissionPolicy](objs, "ValidatingAdmissionPolicy", "pipeline-operator-webhook-guard"),
			the[admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs, "ValidatingAdmissionPolicyBinding", "pipeline-operator-webhook-guard"),
			the[rbacv1.ClusterRole](objs, "ClusterRole", "pipeline-operator-webhook-cert-injector-role"),
			the[rbacv1.ClusterRoleBinding](objs, "ClusterRoleBinding", "pipeline-operator-webhook-cert-injector-rolebinding"),
			the[rbacv1.ClusterRole](objs, "ClusterRole", "pipeline-operator-manager-role"),
			the[rbacv1.ClusterRoleBinding](objs, "ClusterRoleBinding", "pipeline-operator-manager-rolebinding"),
			the[rbacv1.Role](objs, "Role", "pipeline-operator-leader-election-role"),
			the[rbacv1.RoleBinding](objs, "RoleBinding", "pipeline-operator-leader-election-rolebinding"),
		} {
			Expect(k8sClient.Create(ctx, o)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed()) })
		}
		var err error
		operator, err = client.New(asServiceAccount(sa.Namespace, sa.Name), client.Options{Scheme: testScheme})
		Expect(err).NotTo(HaveOccurred())
		ns = newNamespace(ctx)
		p.Namespace = ns
		// The operator creates only objects a Pipeline controls: the children below name it.
		created := p.DeepCopy()
		Expect(k8sClient.Create(ctx, created)).To(Succeed())
		p.UID = created.UID
		operatorNamespace, operatorServiceAccount, operatorUser = sa.Namespace, sa.Name, user

		hook := the[admissionregistrationv1.ValidatingWebhookConfiguration](objs, "ValidatingWebhookConfiguration", guardWebhook)
		Expect(hook.Webhooks[0].MatchConditions[0].Expression).To(Equal(fmt.Sprintf("request.userInfo.username == '%s'", user)),
			"the guard webhook names the manager's ServiceAccount as config/default makes it")

		// Pipelines of the other storage sources, as the apiserver holds them.
		variants = newNamespace(ctx)
		class = guardClass(ctx, variants)
		classed = p.DeepCopy()
		classed.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
			ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: class.Name}}
		classed = stored(ctx, classed, "classed")
		inline = p.DeepCopy()
		inline.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
			CSI: &pipelinev1.CSIStorage{Driver: "nfs.csi.k8s.io", VolumeAttributes: map[string]string{"server": "nfs.example.com", "share": "/"}}}
		inline = stored(ctx, inline, "inline-csi")
	})

	// create asks, as the operator and without writing, for obj.
	create := func(ctx SpecContext, obj runtime.ApplyConfiguration) error {
		return operator.Apply(ctx, obj, client.FieldOwner("guard-test"), client.DryRunAll)
	}

	It("lets the operator make what it makes", func(ctx SpecContext) {
		config, err := resources.RouterConfigJSON(p, "")
		Expect(err).NotTo(HaveOccurred())
		// The policy takes effect a moment after it is created: wait for it to refuse, then
		// check what it admits.
		Eventually(func() error {
			d := resources.StepDeployment(p, 0, "", "node-a", "")
			d.Spec.Template.Spec.WithServiceAccountName("admin")
			return create(ctx, d)
		}).Should(MatchError(ContainSubstring("the operator runs pods only under the namespace's default ServiceAccount")))

		Expect(create(ctx, resources.StepDeployment(p, 0, "", "node-a", ""))).To(Succeed())
		Expect(create(ctx, resources.StepDeployment(p, 1, resources.PodSecurityRestricted, "", ""))).To(Succeed())
		Expect(create(ctx, resources.RouterDeployment(p, testenv.RouterImage, config, "node-b"))).To(Succeed())
		Expect(create(ctx, resources.PV(p, "", resources.InlineVolumeSource(p)))).To(Succeed())
		Expect(create(ctx, resources.StepsNetworkPolicy(p))).To(Succeed())
		chain := p.DeepCopy()
		chain.Spec.DataPath = nil
		Expect(create(ctx, resources.StepsNetworkPolicy(chain))).To(Succeed())

		By("a step with what its API lets it ask for: tolerations by key, probes on its own port, a RuntimeClass, its own security context")
		served := p.DeepCopy()
		s := &served.Spec.Steps[0]
		s.Protocol = pipelinev1.StepProtocolOpenInference // the protocol's default probes
		s.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		s.RuntimeClassName = "nvidia"
		s.NodeSelector = map[string]string{"accelerator": "a100"}
		s.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsNonRoot: ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			SELinuxOptions: &corev1.SELinuxOptions{Type: "container_t", Level: "s0:c123,c456"}}
		served.Spec.Steps[1].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(resources.StepPortName)}}}
		served.Spec.Steps[1].Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "model-registry"}, Key: "token"}}}}
		Expect(create(ctx, resources.StepDeployment(served, 0, "", "node-a", ""))).To(Succeed())
		Expect(create(ctx, resources.StepDeployment(served, 1, "", "", ""))).To(Succeed())
		grpc := p.DeepCopy()
		grpc.Spec.Steps[1].Protocol = pipelinev1.StepProtocolOpenInferenceGRPC // TCP default probes, an h2c Service port
		Expect(create(ctx, resources.StepDeployment(grpc, 1, "", "", ""))).To(Succeed())
		Expect(create(ctx, resources.StepService(grpc, 1))).To(Succeed())

		By("the other children: Services of every type expose asks for, the Ingress, ConfigMap, claim, autoscaler and disruption budgets")
		for _, t := range []pipelinev1.ServiceType{pipelinev1.ServiceTypeClusterIP, pipelinev1.ServiceTypeNodePort, pipelinev1.ServiceTypeLoadBalancer} {
			exposed, direct := p.DeepCopy(), chain.DeepCopy()
			exposed.Spec.Expose = &pipelinev1.Expose{ServiceType: t, Ingress: &pipelinev1.IngressExpose{Host: "infer.example.com"}}
			direct.Spec.Expose = exposed.Spec.Expose
			exposed = stored(ctx, exposed, "exposed-"+strings.ToLower(string(t)))
			direct = stored(ctx, direct, "direct-"+strings.ToLower(string(t)))
			Expect(create(ctx, resources.RouterService(exposed))).To(Succeed(), "the router's Service, %s", t)
			Expect(create(ctx, resources.StepService(direct, 0))).To(Succeed(), "the entry step's Service, %s", t)
			Expect(create(ctx, resources.Ingress(exposed))).To(Succeed())
		}
		Expect(create(ctx, resources.StepService(p, 1))).To(Succeed())
		Expect(create(ctx, resources.RouterConfigMap(p, config))).To(Succeed())
		Expect(create(ctx, resources.PVC(p, ""))).To(Succeed())
		scaled := p.DeepCopy()
		scaled.Spec.Steps[0].Autoscaling = &pipelinev1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 4,
			TargetCPUUtilizationPercentage: ptr.To[int32](80)}
		Expect(create(ctx, resources.StepHPA(scaled, 0))).To(Succeed())
		Expect(create(ctx, resources.StepPDB(scaled, 0))).To(Succeed())
		Expect(create(ctx, resources.RouterPDB(p))).To(Succeed())

		By("volumes of every source, reserved for claims named after Pipelines of any length")
		Expect(create(ctx, resources.PV(classed, "", resources.ClassVolumeSource(class)))).To(Succeed())
		Expect(create(ctx, resources.PV(inline, "", resources.InlineVolumeSource(inline)))).To(Succeed())
		Expect(create(ctx, resources.PV(p, resources.LegacyPVName(p), resources.InlineVolumeSource(p)))).To(Succeed())
		for _, name := range []string{
			strings.Repeat("a", 47), // the longest whose claim name is not cut
			strings.Repeat("a", 48),
			strings.Repeat("a", 63),
			strings.Repeat("a", 46) + strings.Repeat("-", 10) + strings.Repeat("b", 7), // cut before a run of '-'
		} {
			named := stored(ctx, p, name)
			Expect(create(ctx, resources.PV(named, "", resources.InlineVolumeSource(named)))).To(Succeed(), "claim %s", resources.ClaimName(named))
		}
	})

	It("refuses the operator anything else, with the reason", func(ctx SpecContext) {
		const (
			seccomp   = "the operator's pods run under a seccomp profile (RuntimeDefault or Localhost), never Unconfined"
			appArmor  = "the operator's pods run under an AppArmor profile (RuntimeDefault or Localhost), never Unconfined"
			seLinux   = "the operator's pods take no SELinux type but container_t, container_init_t, container_kvm_t or container_engine_t, and no SELinux user or role"
			root      = "the operator's pods do not ask to run as root (runAsUser 0, runAsNonRoot false)"
			tolerate  = "the operator's pods tolerate neither every taint (a toleration without a key) nor the control plane's"
			probeHost = "the operator's probes and lifecycle hooks name no host (httpGet.host, tcpSocket.host)"
		)
		// container is the step's container in the pod template t.
		container := func(t *corev1ac.PodTemplateSpecApplyConfiguration) *corev1ac.ContainerApplyConfiguration {
			return &t.Spec.Containers[0]
		}
		unconfined := corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeUnconfined)
		httpGet := corev1ac.HTTPGetAction().WithHost("169.254.169.254").WithPath("/latest/meta-data/").WithPort(intstr.FromInt32(80))
		for _, c := range []struct {
			what   string
			change func(*corev1ac.PodTemplateSpecApplyConfiguration)
		}{
			{"the operator runs pods only under the namespace's default ServiceAccount", func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithServiceAccountName("kube-system-admin")
			}},
			{"the operator's pods mount no ServiceAccount token", func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithAutomountServiceAccountToken(true)
			}},
			{"the operator's pods do not share the host's network, process or IPC namespaces", func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithHostPID(true)
			}},
			{"the operator's pods mount only claims, ConfigMaps and emptyDirs", func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithVolumes(corev1ac.Volume().WithName("root").WithHostPath(corev1ac.HostPathVolumeSource().WithPath("/")))
			}},
			{"the operator runs no privileged container", func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithSecurityContext(corev1ac.SecurityContext().WithPrivileged(true))
			}},
			{"the operator's containers add no capability", func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithSecurityContext(corev1ac.SecurityContext().WithCapabilities(corev1ac.Capabilities().WithAdd("SYS_ADMIN")))
			}},
			{"the operator's containers take no port of the host", func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithPorts(corev1ac.ContainerPort().WithContainerPort(22).WithHostPort(22))
			}},
			{seccomp, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithSecurityContext(corev1ac.PodSecurityContext().WithSeccompProfile(unconfined))
			}},
			{seccomp, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithSecurityContext(corev1ac.SecurityContext().WithSeccompProfile(unconfined))
			}},
			{seccomp, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithInitContainers(corev1ac.Container().WithName("init").WithImage("busybox").
					WithSecurityContext(corev1ac.SecurityContext().WithSeccompProfile(unconfined)))
			}},
			{seccomp, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.SecurityContext = nil // the apiserver wants an annotation and a field to agree
				t.WithAnnotations(map[string]string{corev1.SeccompPodAnnotationKey: corev1.SeccompProfileNameUnconfined})
			}},
			{seccomp, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.SecurityContext = nil
				t.WithAnnotations(map[string]string{corev1.SeccompContainerAnnotationKeyPrefix + "step": corev1.SeccompProfileNameUnconfined})
			}},
			{appArmor, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithSecurityContext(corev1ac.PodSecurityContext().
					WithAppArmorProfile(corev1ac.AppArmorProfile().WithType(corev1.AppArmorProfileTypeUnconfined)))
			}},
			{appArmor, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithSecurityContext(corev1ac.SecurityContext().
					WithAppArmorProfile(corev1ac.AppArmorProfile().WithType(corev1.AppArmorProfileTypeUnconfined)))
			}},
			{appArmor, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.WithAnnotations(map[string]string{corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "step": corev1.DeprecatedAppArmorBetaProfileNameUnconfined})
			}},
			{seLinux, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithSecurityContext(corev1ac.SecurityContext().WithSELinuxOptions(corev1ac.SELinuxOptions().WithType("spc_t")))
			}},
			{seLinux, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithSecurityContext(corev1ac.PodSecurityContext().WithSELinuxOptions(corev1ac.SELinuxOptions().WithType("unconfined_t")))
			}},
			{seLinux, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithSecurityContext(corev1ac.PodSecurityContext().WithSELinuxOptions(corev1ac.SELinuxOptions().WithUser("system_u")))
			}},
			{seLinux, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithSecurityContext(corev1ac.SecurityContext().WithSELinuxOptions(corev1ac.SELinuxOptions().WithRole("sysadm_r")))
			}},
			{"the operator's containers do not allow privilege escalation (allowPrivilegeEscalation true)", func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithSecurityContext(corev1ac.SecurityContext().WithAllowPrivilegeEscalation(true))
			}},
			{root, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithSecurityContext(corev1ac.SecurityContext().WithRunAsUser(0))
			}},
			{root, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithSecurityContext(corev1ac.PodSecurityContext().WithRunAsUser(0))
			}},
			{root, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithSecurityContext(corev1ac.PodSecurityContext().WithRunAsNonRoot(false))
			}},
			{"the operator's containers see /proc masked (procMount Default)", func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				// An unmasked /proc needs a user namespace of the pod's own.
				t.Spec.WithHostUsers(false)
				container(t).WithSecurityContext(corev1ac.SecurityContext().WithProcMount(corev1.UnmaskedProcMount))
			}},
			{"the operator's pods set no sysctl", func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithSecurityContext(corev1ac.PodSecurityContext().WithSysctls(corev1ac.Sysctl().WithName("kernel.msgmax").WithValue("65536")))
			}},
			{"the operator's pods are placed by the scheduler, never by nodeName", func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithNodeName("control-plane-1")
			}},
			{tolerate, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithTolerations(corev1ac.Toleration().WithOperator(corev1.TolerationOpExists))
			}},
			{tolerate, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithTolerations(corev1ac.Toleration().WithKey("node-role.kubernetes.io/control-plane").
					WithOperator(corev1.TolerationOpExists).WithEffect(corev1.TaintEffectNoSchedule))
			}},
			{tolerate, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				t.Spec.WithTolerations(corev1ac.Toleration().WithKey("node-role.kubernetes.io/master").WithOperator(corev1.TolerationOpExists))
			}},
			{probeHost, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithLivenessProbe(corev1ac.Probe().WithHTTPGet(httpGet))
			}},
			{probeHost, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithStartupProbe(corev1ac.Probe().WithTCPSocket(corev1ac.TCPSocketAction().WithHost("10.0.0.1").WithPort(intstr.FromInt32(2379))))
			}},
			{probeHost, func(t *corev1ac.PodTemplateSpecApplyConfiguration) {
				container(t).WithLifecycle(corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().WithHTTPGet(httpGet)))
			}},
		} {
			d := resources.StepDeployment(p, 0, "", "node-a", "")
			c.change(d.Spec.Template)
			err := create(ctx, d)
			Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", c.what, err)
			Expect(err).To(MatchError(ContainSubstring(c.what)))
		}

		By("ephemeral containers: the apiserver allows none in a pod template")
		d := resources.StepDeployment(p, 0, "", "node-a", "")
		d.Spec.Template.Spec.WithEphemeralContainers(corev1ac.EphemeralContainer().WithName("debug").WithImage("busybox").
			WithSecurityContext(corev1ac.SecurityContext().WithPrivileged(true)))
		err := create(ctx, d)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err).To(MatchError(ContainSubstring("ephemeralContainers")))

		By("Windows HostProcess containers: the apiserver wants the host's network for them, which the guard refuses")
		d = resources.StepDeployment(p, 0, "", "node-a", "")
		d.Spec.Template.Spec.WithSecurityContext(corev1ac.PodSecurityContext().
			WithWindowsOptions(corev1ac.WindowsSecurityContextOptions().WithHostProcess(true)))
		err = create(ctx, d)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err).To(MatchError(ContainSubstring("hostNetwork")))

		By("PersistentVolumes: a node's files, a driver's credentials, a claim not of the Pipeline the volume names")
		pv := corev1ac.PersistentVolume("guard-test-host").WithSpec(corev1ac.PersistentVolumeSpec().
			WithCapacity(corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}).
			WithAccessModes(corev1.ReadOnlyMany).
			WithHostPath(corev1ac.HostPathVolumeSource().WithPath("/etc")))
		Expect(create(ctx, pv)).To(MatchError(ContainSubstring("the operator makes PersistentVolumes of NFS or CSI only")))

		csi := p.DeepCopy()
		csi.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
			CSI: &pipelinev1.CSIStorage{Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"secretProviderClass": "cloud"}}}
		const secretRef = "the operator's CSI volumes name no Secret"
		for _, ref := range []func(*corev1ac.CSIPersistentVolumeSourceApplyConfiguration, *corev1ac.SecretReferenceApplyConfiguration) *corev1ac.CSIPersistentVolumeSourceApplyConfiguration{
			(*corev1ac.CSIPersistentVolumeSourceApplyConfiguration).WithNodePublishSecretRef,
			(*corev1ac.CSIPersistentVolumeSourceApplyConfiguration).WithNodeStageSecretRef,
			(*corev1ac.CSIPersistentVolumeSourceApplyConfiguration).WithNodeExpandSecretRef,
			(*corev1ac.CSIPersistentVolumeSourceApplyConfiguration).WithControllerPublishSecretRef,
			(*corev1ac.CSIPersistentVolumeSourceApplyConfiguration).WithControllerExpandSecretRef,
		} {
			v := resources.PV(csi, "", resources.InlineVolumeSource(csi))
			ref(v.Spec.CSI, corev1ac.SecretReference().WithNamespace(metav1.NamespaceSystem).WithName("cloud-credentials"))
			Expect(create(ctx, v)).To(MatchError(ContainSubstring(secretRef)))
		}

		const claimRef = "the operator's PersistentVolumes are reserved (claimRef) for the model claim of the Pipeline their labels name"
		for what, change := range map[string]func(*corev1ac.PersistentVolumeApplyConfiguration){
			"a claim of another namespace": func(v *corev1ac.PersistentVolumeApplyConfiguration) {
				v.Spec.ClaimRef.WithNamespace("another-tenant")
			},
			"a claim of kube-system, labelled so": func(v *corev1ac.PersistentVolumeApplyConfiguration) {
				v.Spec.ClaimRef.WithNamespace(metav1.NamespaceSystem)
				v.WithLabels(map[string]string{resources.LabelPipelineNamespace: metav1.NamespaceSystem})
			},
			"a claim named otherwise": func(v *corev1ac.PersistentVolumeApplyConfiguration) {
				v.Spec.ClaimRef.WithName("data")
			},
			"a claim of another Pipeline's name": func(v *corev1ac.PersistentVolumeApplyConfiguration) {
				v.WithLabels(map[string]string{resources.LabelPipeline: "another-pipeline"})
			},
			"no claim: any claim of the cluster could bind it": func(v *corev1ac.PersistentVolumeApplyConfiguration) {
				v.Spec.ClaimRef = nil
			},
		} {
			v := resources.PV(p, "", resources.InlineVolumeSource(p))
			change(v)
			Expect(create(ctx, v)).To(MatchError(ContainSubstring(claimRef)), what)
		}

		By("Services: no external IPs, no type a Pipeline cannot ask for")
		svc := resources.StepService(p, 0)
		svc.Spec.WithExternalIPs("203.0.113.10")
		Expect(create(ctx, svc)).To(MatchError(ContainSubstring("the operator's Services have no external IPs")))
		svc = resources.StepService(p, 0)
		svc.Spec.WithType(corev1.ServiceTypeExternalName).WithExternalName("kubernetes.default.svc.cluster.local")
		Expect(create(ctx, svc)).To(MatchError(ContainSubstring("the operator's Services are of the types a Pipeline's expose asks for")))

		By("NetworkPolicies: a policy only adds what it admits, so one that admitted more would open pods others isolated")
		const ownNamespace = "the operator's NetworkPolicies admit only pods of their own namespace"
		for _, c := range []struct {
			message string
			change  func(*networkingv1ac.NetworkPolicySpecApplyConfiguration)
		}{
			{"the operator's NetworkPolicies select only step pods", func(spec *networkingv1ac.NetworkPolicySpecApplyConfiguration) {
				spec.WithPodSelector(metav1ac.LabelSelector())
			}},
			{ownNamespace, func(spec *networkingv1ac.NetworkPolicySpecApplyConfiguration) {
				spec.Ingress[0].WithFrom(networkingv1ac.NetworkPolicyPeer().WithNamespaceSelector(metav1ac.LabelSelector()))
			}},
			{ownNamespace, func(spec *networkingv1ac.NetworkPolicySpecApplyConfiguration) {
				spec.Ingress[0].WithFrom(networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR("0.0.0.0/0")))
			}},
			{ownNamespace, func(spec *networkingv1ac.NetworkPolicySpecApplyConfiguration) {
				spec.WithIngress(networkingv1ac.NetworkPolicyIngressRule()) // from anyone
			}},
			{"the operator's NetworkPolicies have no egress rule", func(spec *networkingv1ac.NetworkPolicySpecApplyConfiguration) {
				spec.WithEgress(networkingv1ac.NetworkPolicyEgressRule())
			}},
		} {
			np := resources.StepsNetworkPolicy(p)
			c.change(np.Spec)
			err := create(ctx, np)
			Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", c.message, err)
			Expect(err).To(MatchError(ContainSubstring(c.message)))
		}
	})

	It("refuses the operator Services and volumes their Pipeline does not ask for (the guard webhook)", func(ctx SpecContext) {
		const asks = "the operator writes a Service or PersistentVolume only as its Pipeline asks"
		// Any caller of the webhook port may forge a review: a refusal names what the request
		// carries, never what a stored Pipeline holds (its storage's source, its volume's name).
		held := []string{p.Spec.ModelStorage.NFS.Server, p.Spec.ModelStorage.NFS.Path, resources.PVName(inline),
			inline.Spec.ModelStorage.CSI.VolumeAttributes["server"], class.Name}
		refused := func(obj runtime.ApplyConfiguration, why string) {
			GinkgoHelper()
			err := create(ctx, obj)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", why, err)
			Expect(err).To(MatchError(And(ContainSubstring(asks), ContainSubstring(why))))
			for _, h := range held {
				Expect(err.Error()).NotTo(ContainSubstring(h), "what a stored Pipeline holds")
			}
		}

		By("Services: the type expose asks for, the pods the builders select, the names they give")
		svc := resources.StepService(p, 0)
		svc.Spec.WithType(corev1.ServiceTypeLoadBalancer)
		refused(svc, fmt.Sprintf("Service %s of Pipeline %s/%s is of type LoadBalancer, which its spec does not ask for (expose.serviceType)",
			*svc.Name, ns, p.Name))
		svc = resources.RouterService(p)
		svc.Spec.WithType(corev1.ServiceTypeNodePort)
		refused(svc, "is of type NodePort, which its spec does not ask for")
		svc = resources.StepService(p, 1)
		svc.Spec.Selector = map[string]string{"app": "tenant-database"}
		refused(svc, "selects the pods map[app:tenant-database], which are not its step's")
		svc = resources.StepService(p, 1)
		svc.WithName("tenant-database")
		refused(svc, fmt.Sprintf("Pipeline %s/%s makes no Service named tenant-database", ns, p.Name))
		gone := p.DeepCopy()
		gone.UID = "0f3c4a8e-0000-4000-8000-000000000000"
		refused(resources.StepService(gone, 0), fmt.Sprintf("is controlled by Pipeline %s/%s of uid %s, which does not exist", ns, p.Name, gone.UID))

		By("volumes: the source and mount options the storage gives, under the operator's names, for the Pipeline's claim")
		other := p.DeepCopy()
		other.Spec.ModelStorage.NFS = &pipelinev1.NFSStorage{Server: "10.0.0.9", Path: "/tenant-b"}
		v := resources.PV(p, "", resources.InlineVolumeSource(other))
		refused(v, "has the source NFS 10.0.0.9:/tenant-b, readOnly true, which its storage does not give")
		csi := resources.VolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0123456789", ReadOnly: true}}
		refused(resources.PV(p, "", csi), "has the source CSI driver ebs.csi.aws.com, volume handle vol-0123456789")
		src := resources.InlineVolumeSource(p)
		src.MountOptions = []string{"nolock"}
		refused(resources.PV(p, "", src), `has the mount options ["nolock"], which its storage does not give`)
		// An inline CSI volume's handle is its name: a name of the thief's choice would name any
		// volume of the driver.
		refused(resources.PV(inline, "pvc-3f1b9a7e-tenant-b", resources.InlineVolumeSource(inline)),
			fmt.Sprintf("PersistentVolume pvc-3f1b9a7e-tenant-b is the model volume of no Pipeline %s/inline-csi", variants))
		missing := p.DeepCopy()
		missing.Name = "no-such-pipeline"
		refused(resources.PV(missing, "", resources.InlineVolumeSource(missing)),
			fmt.Sprintf("PersistentVolume %s is the model volume of no Pipeline %s/no-such-pipeline", resources.PVName(missing), ns))

		By("a ModelStorageClass's source only where the class selects the Pipeline's namespace")
		refused(resources.PV(p, "", resources.ClassVolumeSource(class)), "which its storage does not give")
		class := class.DeepCopy()
		class.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "another-tenant"}}
		Expect(k8sClient.Update(ctx, class)).To(Succeed())
		refused(resources.PV(classed, "", resources.ClassVolumeSource(class)),
			fmt.Sprintf("the ModelStorageClass of the model volume %s of Pipeline %s/classed does not select namespace %s",
				resources.PVName(classed), variants, variants))
	})

	It("knows its own identity, which the Pipeline webhook refuses a change of a spec, as the apiserver names it", func() {
		Expect(ownServiceAccount(operator)).To(Equal(operatorUser))
		Expect(ownServiceAccount(k8sClient)).To(BeEmpty(), "an administrator's kubeconfig (make run) is no ServiceAccount")
	})

	It("changes nothing of its webhook configurations and of the Pipeline CRD but their CA", func(ctx SpecContext) {
		const onlyCA = "the operator changes only the caBundle of a webhook configuration"
		hook := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: guardWebhook}, hook)).To(Succeed())
		Expect(operator.Update(ctx, hook.DeepCopy(), client.DryRunAll)).To(Succeed(), "an update that changes nothing")
		Eventually(func() error {
			failOpen := hook.DeepCopy()
			failOpen.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			return operator.Update(ctx, failOpen, client.DryRunAll)
		}).Should(MatchError(ContainSubstring(onlyCA)), "the policy takes effect")
		for what, change := range map[string]func(*admissionregistrationv1.ValidatingWebhookConfiguration){
			"dropped": func(h *admissionregistrationv1.ValidatingWebhookConfiguration) { h.Webhooks = nil },
			"sent elsewhere": func(h *admissionregistrationv1.ValidatingWebhookConfiguration) {
				h.Webhooks[0].ClientConfig.URL = ptr.To("https://203.0.113.7/")
			},
			"asked of no one": func(h *admissionregistrationv1.ValidatingWebhookConfiguration) {
				h.Webhooks[0].MatchConditions[0].Expression = "false"
			},
			"for no resource": func(h *admissionregistrationv1.ValidatingWebhookConfiguration) {
				h.Webhooks[0].Rules[0].Resources = []string{"configmaps"}
			},
			"out of its namespace": func(h *admissionregistrationv1.ValidatingWebhookConfiguration) {
				h.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}
			},
		} {
			changed := hook.DeepCopy()
			change(changed)
			Expect(operator.Update(ctx, changed, client.DryRunAll)).To(MatchError(ContainSubstring(onlyCA)), what)
		}
		// A rotation keeps the old CA beside the new one for a while: a bundle of two.
		rotated := hook.DeepCopy()
		for i := range rotated.Webhooks {
			cc := &rotated.Webhooks[i].ClientConfig
			cc.CABundle = append(append([]byte(nil), cc.CABundle...), testEnv.WebhookInstallOptions.LocalServingCAData...)
		}
		Expect(operator.Update(ctx, rotated, client.DryRunAll)).To(Succeed(), "a new CA")

		By("the Pipeline CRD: its conversion webhook's CA, nothing else")
		const crdCA = "the operator changes only the caBundle of the conversion webhook of a CustomResourceDefinition"
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "pipelines.distri-infer.ndsl.cn"}, crd)).To(Succeed())
		withCA := crd.DeepCopy()
		cc := withCA.Spec.Conversion.Webhook.ClientConfig
		cc.CABundle = append(append([]byte(nil), cc.CABundle...), testEnv.WebhookInstallOptions.LocalServingCAData...)
		Expect(operator.Update(ctx, withCA, client.DryRunAll)).To(Succeed())
		elsewhere := crd.DeepCopy()
		elsewhere.Spec.Conversion.Webhook.ClientConfig.URL = ptr.To("https://203.0.113.7/convert")
		Expect(operator.Update(ctx, elsewhere, client.DryRunAll)).To(MatchError(ContainSubstring(crdCA)))
		loosened := crd.DeepCopy()
		loosened.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{
			Type: "object", XPreserveUnknownFields: ptr.To(true)}
		Expect(operator.Update(ctx, loosened, client.DryRunAll)).To(MatchError(ContainSubstring(crdCA)))
	})

	It("creates only objects a Pipeline controls, changes only what it made, and writes nothing in the cluster's own namespaces", func(ctx SpecContext) {
		labels := map[string]string{resources.LabelManagedBy: resources.ManagedBy}
		cm := func(namespace string) *corev1ac.ConfigMapApplyConfiguration {
			return corev1ac.ConfigMap("guard-test", namespace).WithLabels(labels).WithData(map[string]string{"k": "v"})
		}
		owned := func(namespace string) *corev1ac.ConfigMapApplyConfiguration {
			return cm(namespace).WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(pipelinev1.GroupVersion.String()).
				WithKind("Pipeline").WithName(p.Name).WithUID(p.UID).WithController(true))
		}
		Eventually(func() error { return create(ctx, cm(ns)) }).
			Should(MatchError(ContainSubstring("the operator creates only objects a Pipeline controls")))
		Expect(create(ctx, owned(ns))).To(Succeed())

		By("never in kube-system, owned or not")
		const system = "the operator writes nothing in the cluster's own namespace kube-system"
		Expect(create(ctx, owned(metav1.NamespaceSystem))).To(MatchError(ContainSubstring(system)))
		Expect(operator.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extension-apiserver-authentication", Namespace: metav1.NamespaceSystem}},
			client.DryRunAll)).To(MatchError(ContainSubstring(system)))

		By("a tenant's own object is not the operator's to change")
		own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tenant-config", Namespace: newNamespace(ctx)}, Data: map[string]string{"k": "v"}}
		Expect(k8sClient.Create(ctx, own)).To(Succeed(), "others write in a namespace without Pipelines as their rights allow")
		// The operator writes by patches (it has no update right).
		changed := own.DeepCopy()
		changed.Data["k"] = "changed"
		Expect(operator.Patch(ctx, changed, client.MergeFrom(own), client.DryRunAll)).
			To(MatchError(ContainSubstring("the operator changes and deletes only what it made")))
		changed.Labels = labels
		Expect(operator.Patch(ctx, changed, client.MergeFrom(own), client.DryRunAll)).
			To(MatchError(ContainSubstring("the operator changes and deletes only what it made")), "nor by labelling it")
		Expect(operator.Delete(ctx, own, client.DryRunAll)).To(MatchError(ContainSubstring("the operator changes and deletes only what it made")))
	})

	It("deletes only the claims, volumes and other children it made", func(ctx SpecContext) {
		const refused = "the operator changes and deletes only what it made"
		labels := map[string]string{resources.LabelManagedBy: resources.ManagedBy}
		claim := func(name string, l map[string]string) *corev1.PersistentVolumeClaim {
			return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		}
		volume := func(name string, l map[string]string) *corev1.PersistentVolume {
			return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
				Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
					PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example.invalid", Path: "/"}}}}
		}
		tenants, made := claim("tenant-claim", nil), claim("operator-claim", labels)
		made.OwnerReferences = []metav1.OwnerReference{{APIVersion: pipelinev1.GroupVersion.String(), Kind: "Pipeline",
			Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
		admins := volume("guard-test-admins", nil)
		// The operator's volume is reserved for its Pipeline's claim, as PV makes it.
		madePV := testenv.Typed[corev1.PersistentVolume](GinkgoT(), resources.PV(p, "", resources.InlineVolumeSource(p)))
		Expect(k8sClient.Create(ctx, tenants)).To(Succeed())
		Expect(k8sClient.Create(ctx, admins)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, admins))).To(Succeed()) })
		Expect(operator.Create(ctx, made)).To(Succeed())
		Expect(operator.Create(ctx, madePV)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, madePV))).To(Succeed()) })

		Eventually(func() error { return operator.Delete(ctx, admins, client.DryRunAll) }).Should(MatchError(ContainSubstring(refused)))
		Expect(operator.Delete(ctx, tenants, client.DryRunAll)).To(MatchError(ContainSubstring(refused)))
		Expect(operator.Delete(ctx, made, client.DryRunAll)).To(Succeed())
		Expect(operator.Delete(ctx, madePV, client.DryRunAll)).To(Succeed())
	})

	It("reads and renews its own Lease only", func(ctx SpecContext) {
		Expect(leaderelection.ID).To(Equal("pipeline-operator.distri-infer.ndsl.cn"), "the Role names the Lease by this name")
		lease := func(name string) *coordinationv1.Lease {
			return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: operatorNamespace}}
		}
		other := lease("another-operator")
		Expect(k8sClient.Create(ctx, other)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, other))).To(Succeed()) })
		own := lease(leaderelection.ID)
		Expect(operator.Create(ctx, own)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, own))).To(Succeed()) })
		Expect(operator.Get(ctx, client.ObjectKeyFromObject(own), own)).To(Succeed())
		own.Spec.HolderIdentity = ptr.To("replica-a")
		Expect(operator.Update(ctx, own)).To(Succeed())

		forbidden := func(err error) { GinkgoHelper(); Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err) }
		forbidden(operator.Get(ctx, client.ObjectKeyFromObject(other), &coordinationv1.Lease{}))
		other.Spec.HolderIdentity = ptr.To(operatorUser)
		forbidden(operator.Update(ctx, other))
		forbidden(operator.Delete(ctx, other))
		forbidden(operator.Delete(ctx, own))
		forbidden(operator.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace(operatorNamespace)))
	})

	It("under OLM, in the operators namespace it shares, reads no Secret and no other Lease, and updates no CRD", func(ctx SpecContext) {
		data, err := os.ReadFile(testenv.RepoPath("bundle", "manifests", "pipeline-operator.clusterserviceversion.yaml"))
		Expect(err).NotTo(HaveOccurred())
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		Expect(yaml.Unmarshal(data, csv)).To(Succeed())
		const olmNamespace = "operators"
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: olmNamespace}}))).To(Succeed())
		install := csv.Spec.InstallStrategy.StrategySpec
		Expect(install.Permissions).To(HaveLen(1))
		Expect(install.ClusterPermissions).To(HaveLen(1))
		sa := install.Permissions[0].ServiceAccountName
		subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: olmNamespace}}
		// As OLM grants them: a Role in the install namespace, a ClusterRole.
		for _, o := range []client.Object{
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "olm-csv-permissions", Namespace: olmNamespace}, Rules: install.Permissions[0].Rules},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "olm-csv-permissions", Namespace: olmNamespace}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "olm-csv-permissions"}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "olm-csv-cluster-permissions"}, Rules: install.ClusterPermissions[0].Rules},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "olm-csv-cluster-permissions"}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "olm-csv-cluster-permissions"}},
		} {
			Expect(k8sClient.Create(ctx, o)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed()) })
		}
		olmOperator, err := client.New(asServiceAccount(olmNamespace, sa), client.Options{Scheme: testScheme})
		Expect(err).NotTo(HaveOccurred())

		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "another-operators-secret", Namespace: olmNamespace}}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, secret))).To(Succeed()) })
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "another-operators-lease", Namespace: olmNamespace}}
		Expect(k8sClient.Create(ctx, lease)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, lease))).To(Succeed()) })

		forbidden := func(err error) { GinkgoHelper(); Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err) }
		// Its own Lease works, so that the RBAC above is what is refused below.
		own := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaderelection.ID, Namespace: olmNamespace}}
		Eventually(func() error { return olmOperator.Create(ctx, own) }).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, own))).To(Succeed()) })
		Expect(olmOperator.Get(ctx, client.ObjectKeyFromObject(own), own)).To(Succeed())

		forbidden(olmOperator.List(ctx, &corev1.SecretList{}, client.InNamespace(olmNamespace)))
		forbidden(olmOperator.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}))
		forbidden(olmOperator.Get(ctx, client.ObjectKeyFromObject(lease), &coordinationv1.Lease{}))
		forbidden(olmOperator.Delete(ctx, lease))
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(olmOperator.Get(ctx, client.ObjectKey{Name: "pipelines.distri-infer.ndsl.cn"}, crd)).To(Succeed(), "the storage migration reads it")
		forbidden(olmOperator.Update(ctx, crd))
		forbidden(olmOperator.List(ctx, &admissionregistrationv1.ValidatingWebhookConfigurationList{}))
	})

	It("keeps the managed-by label the operator's: a tenant can neither create an object with it nor add it", func(ctx SpecContext) {
		tenantCfg := rest.CopyConfig(cfg)
		tenantCfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant", Groups: []string{"system:authenticated"}}
		tenant, err := client.New(tenantCfg, client.Options{Scheme: testScheme})
		Expect(err).NotTo(HaveOccurred())
		// A namespace editor's rights on ConfigMaps.
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
				Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}}}
		Expect(k8sClient.Create(ctx, role)).To(Succeed())
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "tenant"}}}
		Expect(k8sClient.Create(ctx, binding)).To(Succeed())
		const refused = "the label app.kubernetes.io/managed-by=pipeline-operator is the operator's"
		labelled := func(name string) *corev1.ConfigMap {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Labels: map[string]string{resources.LabelManagedBy: resources.ManagedBy}}, Data: map[string]string{"k": "v"}}
		}
		Eventually(func() error { return tenant.Create(ctx, labelled("tenant-labelled")) }).
			Should(MatchError(ContainSubstring(refused)))

		By("putting the label on an object of theirs is refused too; their own objects are theirs")
		own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tenant-own", Namespace: ns}, Data: map[string]string{"k": "v"}}
		Expect(tenant.Create(ctx, own)).To(Succeed())
		own.Labels = map[string]string{resources.LabelManagedBy: resources.ManagedBy}
		Expect(tenant.Update(ctx, own)).To(MatchError(ContainSubstring(refused)))
		own.Labels = map[string]string{resources.LabelManagedBy: "someone-else"}
		Expect(tenant.Update(ctx, own)).To(Succeed())

		By("the operator labels what it makes, and anyone may update an object that carries the label already")
		made := labelled("operator-made")
		made.OwnerReferences = []metav1.OwnerReference{{APIVersion: pipelinev1.GroupVersion.String(), Kind: "Pipeline",
			Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
		Expect(operator.Create(ctx, made)).To(Succeed())
		made.Data["k"] = "changed"
		Expect(tenant.Update(ctx, made)).To(Succeed())
	})

	It("guards the label on every kind the manager's cache selects by it", func() {
		guarded := map[schema.GroupResource]bool{}
		for _, rule := range labelPolicy.Spec.MatchConstraints.ResourceRules {
			for _, g := range rule.APIGroups {
				for _, r := range rule.Resources {
					guarded[schema.GroupResource{Group: g, Resource: r}] = true
				}
			}
		}
		for obj := range apply.Transforms() {
			gvks, _, err := testScheme.ObjectKinds(obj)
			Expect(err).NotTo(HaveOccurred())
			mapping, err := k8sClient.RESTMapper().RESTMapping(gvks[0].GroupKind(), gvks[0].Version)
			Expect(err).NotTo(HaveOccurred())
			Expect(guarded).To(HaveKey(mapping.Resource.GroupResource()),
				"config/policy/guard.yaml's label-guard must cover every child kind of apply.Transforms")
		}
	})

	It("leaves everyone else to their own rights", func(ctx SpecContext) {
		d := resources.StepDeployment(p, 0, "", "node-a", "")
		d.Spec.Template.Spec.WithServiceAccountName("admin").WithAutomountServiceAccountToken(true)
		Expect(k8sClient.Apply(ctx, d, client.FieldOwner("guard-test"), client.DryRunAll)).To(Succeed())
	})

	It("still patches a Pipeline's spec without the webhooks, and deletes the steps' NetworkPolicy, as the operator may", func(ctx SpecContext) {
		// The finalizer is written by a patch, and RBAC cannot confine a patch to metadata: the
		// Pipeline webhook refuses the operator's identity a change of the spec
		// (internal/admission/operator_test.go), which this suite does not serve.
		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		changed := got.DeepCopy()
		changed.Spec.Steps[0].Image = "registry.example.com/another:1"
		Expect(operator.Patch(ctx, changed, client.MergeFrom(got), client.DryRunAll)).To(Succeed())

		// The operator makes the policy again at once: it watches them.
		Expect(operator.Apply(ctx, resources.StepsNetworkPolicy(p), client.FieldOwner("guard-test"))).To(Succeed())
		policy := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: resources.StepsNetworkPolicyName(p), Namespace: ns}}
		Expect(operator.Delete(ctx, policy)).To(Succeed())
	})

	// Last: it reconciles, then deletes, the suite's Pipeline.
	It("reconciles a Pipeline and cleans it up as the operator, within its roles and every guard", func(ctx SpecContext) {
		mgr, err := New(asServiceAccount(operatorNamespace, operatorServiceAccount), Options{MetricsAddr: "0", ProbeAddr: "0", SeveralInProcess: true, MetricsRegistry: prometheus.NewRegistry(),
			RouterImage: testenv.RouterImage, MaxConcurrentReconciles: 1})
		Expect(err).NotTo(HaveOccurred())
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()
		DeferCleanup(func() { cancel(); Expect(<-done).To(Succeed()) })

		key := client.ObjectKeyFromObject(p)
		reconciled := func(g Gomega) {
			got := &pipelinev1.Pipeline{}
			g.Expect(k8sClient.Get(ctx, key, got)).To(Succeed())
			cond := meta.FindStatusCondition(got.Status.Conditions, pipelinev1.ConditionReconciled)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "%s: %s", cond.Reason, cond.Message)
		}
		Eventually(reconciled).WithTimeout(time.Minute).Should(Succeed())
		deployments := &appsv1.DeploymentList{}
		Expect(k8sClient.List(ctx, deployments, client.InNamespace(ns))).To(Succeed())
		Expect(deployments.Items).To(HaveLen(len(p.Spec.Steps)+1), "a Deployment per step and the router's")
		policy := &networkingv1.NetworkPolicy{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.StepsNetworkPolicyName(p)}, policy)).To(Succeed(),
			"the steps' NetworkPolicy, within the operator's roles and the guard")
		Expect(policy.Spec.Ingress[0].From[0].PodSelector.MatchLabels).To(Equal(resources.RouterSelector(p)))

		By("deleting it: the operator deletes what it made, its volume included, and lets it go")
		Expect(k8sClient.Delete(ctx, &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}})).To(Succeed())
		Eventually(func() error { return k8sClient.Get(ctx, key, &pipelinev1.Pipeline{}) }).WithTimeout(time.Minute).
			Should(Satisfy(apierrors.IsNotFound))
		Eventually(func(g Gomega) {
			pvs := &corev1.PersistentVolumeList{}
			g.Expect(k8sClient.List(ctx, pvs, client.MatchingLabels{resources.LabelManagedBy: resources.ManagedBy})).To(Succeed())
			for _, pv := range pvs.Items {
				// Deleted: without kube-controller-manager, pv-protection holds it Terminating.
				g.Expect(pv.Labels[resources.LabelPipelineNamespace] != ns || !pv.DeletionTimestamp.IsZero()).To(BeTrue(),
					"volume %s of the deleted Pipeline is not deleted", pv.Name)
			}
		}).Should(Succeed())
	})
})

// guardClass is a ModelStorageClass of a CSI volume that selects namespace ns.
func guardClass(ctx context.Context, ns string) *pipelinev1.ModelStorageClass {
	GinkgoHelper()
	class := &pipelinev1.ModelStorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "guard-test-"},
		Spec: pipelinev1.ModelStorageClassSpec{
			CSI:               &pipelinev1.CSIModelStorageSource{Driver: "csi.example.com", VolumeHandle: "models", VolumeAttributes: map[string]string{"share": "models"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}
	Expect(k8sClient.Create(ctx, class)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, class))).To(Succeed()) })
	return class
}
