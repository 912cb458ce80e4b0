package manager

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ndsl-cn/pipeline-operator/internal/apply"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The ValidatingAdmissionPolicy of config/policy binds the operator's own identity to what it
// makes, so that a manager whose code or token is taken still cannot run pods under another
// ServiceAccount, on the host's namespaces, or with a node's files, nor make a hostPath volume.
var _ = Describe("The guard on the operator's identity", Ordered, func() {
	var (
		labelPolicy *admissionregistrationv1.ValidatingAdmissionPolicy
		operator    client.Client
		ns          string
		p           = testenv.RoutedSample(GinkgoT())
	)

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
		for _, o := range []client.Object{
			policy, labelPolicy,
			the[admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs, "ValidatingAdmissionPolicyBinding", "pipeline-operator-label-guard"),
			the[admissionregistrationv1.ValidatingAdmissionPolicyBinding](objs, "ValidatingAdmissionPolicyBinding", "pipeline-operator-guard"),
			the[rbacv1.ClusterRole](objs, "ClusterRole", "pipeline-operator-manager-role"),
			the[rbacv1.ClusterRoleBinding](objs, "ClusterRoleBinding", "pipeline-operator-manager-rolebinding"),
		} {
			Expect(k8sClient.Create(ctx, o)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed()) })
		}
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"}}
		var err error
		operator, err = client.New(c, client.Options{Scheme: testScheme})
		Expect(err).NotTo(HaveOccurred())
		ns = newNamespace(ctx)
		p.Namespace = ns
	})

	// create asks, as the operator and without writing, for obj.
	create := func(ctx SpecContext, obj runtime.ApplyConfiguration) error {
		return operator.Apply(ctx, obj, client.FieldOwner("guard-test"), client.DryRunAll)
	}

	It("lets the operator make what it makes", func(ctx SpecContext) {
		config, err := resources.RouterConfigJSON(p)
		Expect(err).NotTo(HaveOccurred())
		// The policy takes effect a moment after it is created: wait for it to refuse, then
		// check what it admits.
		Eventually(func() error {
			d := resources.StepDeployment(p, 0, "", "node-a")
			d.Spec.Template.Spec.WithServiceAccountName("admin")
			return create(ctx, d)
		}).Should(MatchError(ContainSubstring("the operator runs pods only under the namespace's default ServiceAccount")))

		Expect(create(ctx, resources.StepDeployment(p, 0, "", "node-a"))).To(Succeed())
		Expect(create(ctx, resources.StepDeployment(p, 1, resources.PodSecurityRestricted, ""))).To(Succeed())
		Expect(create(ctx, resources.RouterDeployment(p, testenv.RouterImage, config, "node-b"))).To(Succeed())
		Expect(create(ctx, resources.PV(p, "", resources.InlineVolumeSource(p)))).To(Succeed())
	})

	It("refuses the operator anything else, with the reason", func(ctx SpecContext) {
		for what, change := range map[string]func(*corev1ac.PodSpecApplyConfiguration){
			"the operator runs pods only under the namespace's default ServiceAccount": func(pod *corev1ac.PodSpecApplyConfiguration) {
				pod.WithServiceAccountName("kube-system-admin")
			},
			"the operator's pods mount no ServiceAccount token": func(pod *corev1ac.PodSpecApplyConfiguration) {
				pod.WithAutomountServiceAccountToken(true)
			},
			"the operator's pods do not share the host's network, process or IPC namespaces": func(pod *corev1ac.PodSpecApplyConfiguration) {
				pod.WithHostPID(true)
			},
			"the operator's pods mount only claims, ConfigMaps and emptyDirs": func(pod *corev1ac.PodSpecApplyConfiguration) {
				pod.WithVolumes(corev1ac.Volume().WithName("root").WithHostPath(corev1ac.HostPathVolumeSource().WithPath("/")))
			},
		} {
			d := resources.StepDeployment(p, 0, "", "node-a")
			change(d.Spec.Template.Spec)
			err := create(ctx, d)
			Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", what, err)
			Expect(err).To(MatchError(ContainSubstring(what)))
		}

		pv := corev1ac.PersistentVolume("guard-test-host").WithSpec(corev1ac.PersistentVolumeSpec().
			WithCapacity(corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}).
			WithAccessModes(corev1.ReadOnlyMany).
			WithHostPath(corev1ac.HostPathVolumeSource().WithPath("/etc")))
		Expect(create(ctx, pv)).To(MatchError(ContainSubstring("the operator makes PersistentVolumes of NFS or CSI only")))
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
		d := resources.StepDeployment(p, 0, "", "node-a")
		d.Spec.Template.Spec.WithServiceAccountName("admin").WithAutomountServiceAccountToken(true)
		Expect(k8sClient.Apply(ctx, d, client.FieldOwner("guard-test"), client.DryRunAll)).To(Succeed())
	})
})
