package admission

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// as is a client that acts as user, with the RBAC rights the test gives it.
func as(user string) client.Client {
	GinkgoHelper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	out, err := client.New(c, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return out
}

// grant gives user the rules, in namespace ns or (ns empty) cluster-wide.
func grant(ctx context.Context, ns, user string, rules ...rbacv1.PolicyRule) {
	GinkgoHelper()
	name := "test-" + user
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	if ns == "" {
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}})).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(k8sClient.Delete(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
			Expect(k8sClient.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
		})
		return
	}
	Expect(k8sClient.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules})).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})).To(Succeed())
}

// editPipelines are a namespace editor's rights on Pipelines (what pipeline-editor aggregates
// into the built-in edit role).
var editPipelines = rbacv1.PolicyRule{APIGroups: []string{pipelinev1.GroupVersion.Group}, Resources: []string{"pipelines"},
	Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}

var _ = Describe("Inline storage sources and the requester's rights", func() {
	var ns, tenant string
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		tenant = ns + "-tenant"
		grant(ctx, ns, tenant, editPipelines)
	})

	It("refuses a tenant the NFS and CSI storage that would make the operator create a PersistentVolume, and says what works", func(ctx SpecContext) {
		p := sample(ns)
		err := as(tenant).Create(ctx, p)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(
			ContainSubstring("spec.modelStorage.type"),
			ContainSubstring("NFS storage (NFS server 192.168.20.235, share /home/aiedge/csiTest)"),
			ContainSubstring(tenant+" may not create PersistentVolumes (verb create on persistentvolumes, cluster-wide)"),
			ContainSubstring("use modelStorage.type StorageClass"),
			ContainSubstring("ExistingClaim (a claim in namespace "+ns+")")))

		csi := sample(ns)
		csi.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
			CSI: &pipelinev1.CSIStorage{Driver: "s3.csi.example.com", VolumeAttributes: map[string]string{"bucket": "other-team"}}}
		err = as(tenant).Create(ctx, csi)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("CSI storage (CSI driver s3.csi.example.com)"))

		By("the storage that only makes or uses a claim in the tenant's namespace stays open")
		for _, m := range []pipelinev1.ModelStorage{storageClass("standard"), existingClaim("models")} {
			q := sample(ns)
			q.Name = "tenant-" + strings.ToLower(string(m.Type))
			q.Spec.ModelStorage = m
			Expect(as(tenant).Create(ctx, q)).To(Succeed(), "%s", m.Type)
		}
	})

	It("accepts the sample Pipeline from a cluster administrator and from a user who may create PersistentVolumes", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, sample(ns))).To(Succeed(), "the suite's client is a cluster administrator")
		storageAdmin := ns + "-storage-admin"
		grant(ctx, ns, storageAdmin, editPipelines)
		grant(ctx, "", storageAdmin, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"create"}})
		p := sample(ns)
		p.Name = "by-storage-admin"
		Expect(as(storageAdmin).Create(ctx, p)).To(Succeed())
	})

	It("lets a tenant edit the rest of a Pipeline an administrator made, but not its storage", func(ctx SpecContext) {
		p := sample(ns)
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(as(tenant).Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		p.Spec.Steps[1].Image = "nginx:1.27"
		Expect(as(tenant).Update(ctx, p)).To(Succeed(), "the storage did not change")

		p.Spec.ModelStorage.NFS.Server, p.Spec.ModelStorage.NFS.Path = "nfs.other-team.example.com", "/secrets"
		err := as(tenant).Update(ctx, p)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("NFS server nfs.other-team.example.com, share /secrets"))
	})
})
