package e2e

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

// A namespace editor is a tenant: the built-in `edit` role (into which the Pipeline editor role
// aggregates) in their namespaces, nothing cluster-wide. They get the storage an administrator
// published to their namespace, and nothing they could not have made themselves.
var _ = Describe("A tenant on a shared cluster", Ordered, func() {
	const tenantName = "alice"
	var (
		ctx              = context.Background()
		tenant           client.Client
		selected, others string
		class            *pipelinev1.ModelStorageClass
	)

	// editorIn makes the tenant an editor of a new namespace, labelled to be selected by the
	// class or not.
	editorIn := func(shared bool) string {
		GinkgoHelper()
		ns := newNamespace(ctx)
		if shared {
			n := &corev1.Namespace{}
			Expect(admin.Get(ctx, client.ObjectKey{Name: ns}, n)).To(Succeed())
			n.Labels["models.distri-infer.ndsl.cn/shared"] = "true"
			Expect(admin.Update(ctx, n)).To(Succeed())
		}
		Expect(admin.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tenantName}},
		})).To(Succeed())
		return ns
	}

	BeforeAll(func() {
		cfg := rest.CopyConfig(adminCfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: tenantName, Groups: []string{"system:authenticated"}}
		var err error
		tenant, err = client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		selected, others = editorIn(true), editorIn(false)

		class, err = samples.ModelStorageClass()
		Expect(err).NotTo(HaveOccurred())
		Expect(admin.Create(ctx, class)).To(Succeed(), "a cluster administrator publishes the NFS export")
		DeferCleanup(func(ctx context.Context) { _ = admin.Delete(ctx, class) })
		// RBAC and the aggregated edit role take a moment to reach the authorizer.
		Eventually(func() error {
			return tenant.List(ctx, &pipelinev1.PipelineList{}, client.InNamespace(selected))
		}).Should(Succeed())
	})

	classStorage := func(p *pipelinev1.Pipeline) {
		p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
			ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: class.Name}}
	}

	It("is refused the design's inline NFS storage, with the permission it lacks and what works instead", func() {
		p, err := samples.Pipeline(selected)
		Expect(err).NotTo(HaveOccurred())
		err = tenant.Create(ctx, p)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		// The storage the message names, and the kinds it offers instead (modelStorage.type
		// StorageClass or ExistingClaim, in whichever case the message words them).
		Expect(err.Error()).To(And(
			ContainSubstring("NFS server 192.168.20.235"), ContainSubstring("/home/aiedge/csiTest"),
			ContainSubstring("alice may not create PersistentVolumes"),
			MatchRegexp(`(?i)storageClass`), MatchRegexp(`(?i)existingClaim`)))
		Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(p), &pipelinev1.Pipeline{}))).To(BeTrue())
	})

	It("runs a Pipeline on the storage published to their namespace", func() {
		p, err := samples.Pipeline(selected)
		Expect(err).NotTo(HaveOccurred())
		classStorage(p)
		Expect(tenant.Create(ctx, p)).To(Succeed())
		Eventually(phaseOf(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		kubectlWaitReady(p)

		pv := &corev1.PersistentVolume{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: get(ctx, p).Status.Storage.VolumeName}, pv)).To(Succeed())
		Expect(pv.Spec.NFS).NotTo(BeNil())
		Expect(pv.Spec.NFS.Server).To(Equal(class.Spec.NFS.Server), "the volume is the class's export")
		Expect(pv.Spec.NFS.Path).To(Equal(class.Spec.NFS.Path))
		Expect(pv.Spec.MountOptions).To(Equal(class.Spec.MountOptions))
		Expect(pv.Spec.ClaimRef.Namespace).To(Equal(selected), "bound to the tenant's own claim")

		By("removing the volume with the Pipeline")
		Expect(tenant.Delete(ctx, p)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(pv), &corev1.PersistentVolume{}))
		}).Should(BeTrue())
	})

	It("is refused the class in a namespace it is not published to", func() {
		p, err := samples.Pipeline(others)
		Expect(err).NotTo(HaveOccurred())
		classStorage(p)
		err = tenant.Create(ctx, p)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("ModelStorageClass shared-models is not published to namespace " + others))
	})

	It("cannot publish storage, nor create volumes, nor reach another namespace", func() {
		own, err := samples.ModelStorageClass()
		Expect(err).NotTo(HaveOccurred())
		own.Name = "alice-models"
		own.Spec.NamespaceSelector = &metav1.LabelSelector{}
		Expect(apierrors.IsForbidden(tenant.Create(ctx, own))).To(BeTrue(), "classes are an administrator's")
		Expect(apierrors.IsForbidden(tenant.Create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "alice-volume"}}))).To(BeTrue())
		p, err := samples.Pipeline(operatorNamespace)
		Expect(err).NotTo(HaveOccurred())
		classStorage(p)
		Expect(apierrors.IsForbidden(tenant.Create(ctx, p))).To(BeTrue(), "no rights outside their namespaces")
	})
})
