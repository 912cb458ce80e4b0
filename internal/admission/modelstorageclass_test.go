package admission

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

// publishedLabel is the namespace label the test classes select.
const publishedLabel = "models.distri-infer.ndsl.cn/shared"

// createClass creates the cluster-scoped ModelStorageClass c as the suite's administrator,
// removed after the test.
func createClass(ctx context.Context, c *pipelinev1.ModelStorageClass) {
	GinkgoHelper()
	Expect(k8sClient.Create(ctx, c)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, c))).To(Succeed()) })
}

// nfsClass is a class of an NFS export that selects the namespaces labelled publishedLabel=value.
func nfsClass(name, value string) *pipelinev1.ModelStorageClass {
	return &pipelinev1.ModelStorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: pipelinev1.ModelStorageClassSpec{
		NFS:               &pipelinev1.NFSModelStorageSource{Server: "nfs.models.example.com", Path: "/exports/models"},
		MountOptions:      []string{"nfsvers=4.1"},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{publishedLabel: value}},
	}}
}

// labelNamespace labels namespace ns key=value.
func labelNamespace(ctx context.Context, ns, key, value string) {
	GinkgoHelper()
	n := &corev1.Namespace{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, n)).To(Succeed())
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[key] = value
	Expect(k8sClient.Update(ctx, n)).To(Succeed())
}

// classStorage is the sample with storage from the ModelStorageClass name.
func classStorage(ns, name string) *pipelinev1.Pipeline {
	p := sample(ns)
	p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
		ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: name}}
	return p
}

var _ = Describe("Storage published by a ModelStorageClass", func() {
	var ns, tenant, class string
	BeforeEach(func(ctx SpecContext) {
		ns = newNamespace(ctx)
		tenant = ns + "-tenant"
		class = ns + "-models"
		grant(ctx, ns, tenant, editPipelines)
		labelNamespace(ctx, ns, publishedLabel, ns)
	})

	It("lets a tenant without rights on PersistentVolumes use a class published to the namespace", func(ctx SpecContext) {
		createClass(ctx, nfsClass(class, ns))
		p := classStorage(ns, class)
		Expect(as(tenant).Create(ctx, p)).To(Succeed())

		got := &pipelinev1.Pipeline{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		Expect(got.Spec.ModelStorage.ModelStorageClass).NotTo(BeNil())
		Expect(got.Spec.ModelStorage.ModelStorageClass.Name).To(Equal(class))
		Expect(got.Spec.ModelStorage.ModelStorageClass.Capacity.String()).To(Equal("1Gi"), "defaults as for NFS")

		By("a class whose namespaceSelector is {} is published to every namespace")
		everywhere := nfsClass(class+"-all", "")
		everywhere.Spec.NamespaceSelector = &metav1.LabelSelector{}
		createClass(ctx, everywhere)
		q := classStorage(ns, everywhere.Name)
		q.Name = "everywhere"
		Expect(as(tenant).Create(ctx, q)).To(Succeed())
	})

	It("refuses a class that does not select the namespace, and says who can change that", func(ctx SpecContext) {
		createClass(ctx, nfsClass(class, "another-team"))
		err := as(tenant).Create(ctx, classStorage(ns, class))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(
			ContainSubstring("spec.modelStorage.modelStorageClass.name"),
			ContainSubstring("ModelStorageClass "+class+" is not published to namespace "+ns),
			ContainSubstring("ask a cluster administrator to add namespace "+ns+" to the namespaceSelector of ModelStorageClass "+class)))

		By("a cluster administrator is refused too: the class decides, not the requester")
		Expect(apierrors.IsForbidden(k8sClient.Create(ctx, classStorage(ns, class)))).To(BeTrue())
	})

	It("refuses a class that does not exist, and says what to do", func(ctx SpecContext) {
		err := as(tenant).Create(ctx, classStorage(ns, class))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(
			ContainSubstring("spec.modelStorage.modelStorageClass.name"),
			ContainSubstring("ModelStorageClass "+class+" does not exist"),
			ContainSubstring("ask a cluster administrator to create it with a namespaceSelector that selects namespace "+ns)))
	})

	It("checks the class again when the storage changes, and not when something else does", func(ctx SpecContext) {
		createClass(ctx, nfsClass(class, ns))
		p := classStorage(ns, class)
		Expect(as(tenant).Create(ctx, p)).To(Succeed())

		By("a class published elsewhere is refused on update")
		createClass(ctx, nfsClass(class+"-elsewhere", "another-team"))
		p.Spec.ModelStorage.ModelStorageClass.Name = class + "-elsewhere"
		err := as(tenant).Update(ctx, p)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("is not published to namespace " + ns))

		By("once the namespace is no longer selected, steps can still be edited")
		labelNamespace(ctx, ns, publishedLabel, "revoked")
		Expect(as(tenant).Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
		p.Spec.Steps[0].Image = "nginx:1.27"
		Expect(as(tenant).Update(ctx, p)).To(Succeed())
	})

	It("refuses an inline NFS source to the same tenant: only published classes are open", func(ctx SpecContext) {
		err := as(tenant).Create(ctx, sample(ns))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("may not create PersistentVolumes"))
	})

	It("names the fields of a v1beta1 request as v1beta1 does", func(ctx SpecContext) {
		createClass(ctx, nfsClass(class, "another-team"))
		p := sampleV1beta1(ns)
		p.Spec.ModelStorage = pipelinev1beta1.ModelStorage{Type: pipelinev1beta1.StorageTypeModelStorageClass, ModelStorageClassName: class}
		err := as(tenant).Create(ctx, p)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(
			ContainSubstring("spec.modelStorage.modelStorageClassName"),
			ContainSubstring("ModelStorageClass "+class+" is not published to namespace "+ns)))

		p.Spec.ModelStorage.ModelStorageClassName = class + "-nowhere"
		err = as(tenant).Create(ctx, p)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(
			ContainSubstring("spec.modelStorage.modelStorageClassName"),
			ContainSubstring("ModelStorageClass "+class+"-nowhere does not exist")))
	})

	It("checks the fields of modelStorage that go with the type", func(ctx SpecContext) {
		createClass(ctx, nfsClass(class, ns))
		for _, tc := range []struct {
			storage pipelinev1.ModelStorage
			message string
		}{
			{pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass},
				"modelStorage.modelStorageClass is set with modelStorage.type ModelStorageClass, and only then"},
			{pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
				ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: class},
				NFS:               &pipelinev1.NFSStorage{Server: "10.0.0.1", Path: "/other"}},
				"modelStorage.nfs is set with modelStorage.type NFS, and only then"},
			{pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass,
				StorageClass:      &pipelinev1.StorageClassStorage{Name: "fast"},
				ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: class}},
				"modelStorage.modelStorageClass is set with modelStorage.type ModelStorageClass, and only then"},
		} {
			p := sample(ns)
			p.Spec.ModelStorage = tc.storage
			err := k8sClient.Create(ctx, p)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(And(ContainSubstring("spec.modelStorage"), ContainSubstring(tc.message)))
		}
	})
})

var _ = Describe("ModelStorageClass validation", func() {
	var name string
	BeforeEach(func(ctx SpecContext) {
		name = newNamespace(ctx) + "-class"
	})

	It("accepts the sample verbatim and defaults readOnly to true", func(ctx SpecContext) {
		c, err := samples.ModelStorageClass()
		Expect(err).NotTo(HaveOccurred())
		c.Name = name
		createClass(ctx, c)
		c.Spec.ReadOnly = nil
		c2 := c.DeepCopy()
		c2.Name, c2.ResourceVersion = name+"-2", ""
		createClass(ctx, c2)
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(c2), c2)).To(Succeed())
		Expect(c2.Spec.ReadOnly).To(HaveValue(BeTrue()))
	})

	It("needs exactly one source", func(ctx SpecContext) {
		both := nfsClass(name, "x")
		both.Spec.CSI = &pipelinev1.CSIModelStorageSource{Driver: "nfs.csi.k8s.io"}
		neither := nfsClass(name, "x")
		neither.Spec.NFS = nil
		for _, c := range []*pipelinev1.ModelStorageClass{both, neither} {
			err := k8sClient.Create(ctx, c)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("a ModelStorageClass needs exactly one source: set either nfs or csi"))
		}
	})

	It("refuses changes to how volumes connect, and allows changes to who may use the class", func(ctx SpecContext) {
		c := nfsClass(name, "team-a")
		createClass(ctx, c)
		for _, tc := range []struct {
			edit    func(*pipelinev1.ModelStorageClassSpec)
			message string
		}{
			{func(s *pipelinev1.ModelStorageClassSpec) { s.NFS.Server = "nfs.other.example.com" },
				"nfs cannot change: the volumes of Pipelines were made from it; create a new ModelStorageClass for another source"},
			{func(s *pipelinev1.ModelStorageClassSpec) {
				s.NFS = nil
				s.CSI = &pipelinev1.CSIModelStorageSource{Driver: "nfs.csi.k8s.io"}
			}, "nfs cannot change"},
			{func(s *pipelinev1.ModelStorageClassSpec) { s.MountOptions = nil },
				"mountOptions cannot change: the volumes of Pipelines were made with them; create a new ModelStorageClass for other options"},
			{func(s *pipelinev1.ModelStorageClassSpec) { s.ReadOnly = ptr.To(false) },
				"readOnly cannot change: the volumes of Pipelines were made with it; create a new ModelStorageClass instead"},
		} {
			edited := &pipelinev1.ModelStorageClass{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(c), edited)).To(Succeed())
			tc.edit(&edited.Spec)
			err := k8sClient.Update(ctx, edited)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring(tc.message))
		}

		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		c.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: publishedLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a", "team-b"}}}}
		Expect(k8sClient.Update(ctx, c)).To(Succeed())
	})

	It("refuses a CSI source without a valid driver name", func(ctx SpecContext) {
		c := nfsClass(name, "x")
		c.Spec.NFS = nil
		c.Spec.CSI = &pipelinev1.CSIModelStorageSource{Driver: "Not_A_Driver"}
		err := k8sClient.Create(ctx, c)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("csi.driver must be a CSI driver name"))
	})
})
