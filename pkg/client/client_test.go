package client_test

import (
	"context"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
	acv1beta1 "github.com/ndsl-cn/pipeline-operator/pkg/client/applyconfiguration/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/pkg/client/informers/externalversions"
)

var _ = Describe("the generated clientset", func() {
	It("creates, gets, lists, updates, updates the status of, patches and deletes a Pipeline", func(ctx context.Context) {
		ns := newNamespace(ctx)
		pipelines := clientset.DistriInferV1beta1().Pipelines(ns)

		sample, err := samples.PipelineV1beta1(ns)
		Expect(err).NotTo(HaveOccurred())
		created, err := pipelines.Create(ctx, sample, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(created.UID).NotTo(BeEmpty())
		Expect(created.Generation).To(Equal(int64(1)))

		got, err := pipelines.Get(ctx, sample.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Spec).To(Equal(created.Spec))
		Expect(got.Spec.Steps).To(HaveLen(2))
		Expect(got.Spec.Steps[0].Args).To(Equal(sample.Spec.Steps[0].Args))
		Expect(got.Spec.ModelStorage.CSIParameter).To(Equal(sample.Spec.ModelStorage.CSIParameter))
		Expect(got.Spec.ModelStorage.MountPath).To(Equal("/models"), "the CRD's defaults are applied")

		list, err := pipelines.List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(1))
		Expect(list.Items[0].Name).To(Equal(sample.Name))

		By("updating the spec, which leaves the status alone")
		got.Spec.Steps[0].Image = "nginx:1.27"
		got.Status.Phase = pipelinev1beta1.PipelinePhaseFailed
		updated, err := pipelines.Update(ctx, got, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(updated.Spec.Steps[0].Image).To(Equal("nginx:1.27"))
		Expect(updated.Generation).To(Equal(int64(2)))
		Expect(updated.Status.Phase).To(BeEmpty(), "the status subresource ignores status in a spec update")

		By("updating the status, which leaves the spec alone")
		updated.Status.Phase = pipelinev1beta1.PipelinePhaseRunning
		updated.Status.ReadySteps = "2/2"
		updated.Spec.Steps[0].Image = "nginx:ignored"
		_, err = pipelines.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		got, err = pipelines.Get(ctx, sample.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Status.Phase).To(Equal(pipelinev1beta1.PipelinePhaseRunning))
		Expect(got.Status.ReadySteps).To(Equal("2/2"))
		Expect(got.Spec.Steps[0].Image).To(Equal("nginx:1.27"))
		Expect(got.Generation).To(Equal(int64(2)))

		By("patching it")
		patched, err := pipelines.Patch(ctx, sample.Name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"team":"vision"}}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(patched.Labels).To(HaveKeyWithValue("team", "vision"))
		Expect(patched.Status.Phase).To(Equal(pipelinev1beta1.PipelinePhaseRunning))

		By("deleting it")
		Expect(pipelines.Delete(ctx, sample.Name, metav1.DeleteOptions{})).To(Succeed())
		_, err = pipelines.Get(ctx, sample.Name, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "get after delete: %v", err)
	})

	It("refuses what the CRD refuses", func(ctx context.Context) {
		ns := newNamespace(ctx)
		sample, err := samples.PipelineV1beta1(ns)
		Expect(err).NotTo(HaveOccurred())
		sample.Spec.Steps = nil
		_, err = clientset.DistriInferV1beta1().Pipelines(ns).Create(ctx, sample, metav1.CreateOptions{})
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "create without steps: %v", err)
	})

	It("applies a Pipeline and its status with server-side apply", func(ctx context.Context) {
		ns := newNamespace(ctx)
		pipelines := clientset.DistriInferV1beta1().Pipelines(ns)
		const manager = "client-test"

		apply := acv1beta1.Pipeline("applied", ns).WithSpec(acv1beta1.PipelineSpec().
			WithSteps(acv1beta1.Step().WithImage("nginx:latest").WithModel("facedetection-1").
				WithArgs(map[string]pipelinev1beta1.ArgValue{pipelinev1beta1.ListenPortArg: "9080"})).
			WithModelStorage(acv1beta1.ModelStorage().WithType(pipelinev1beta1.StorageTypeNFS).
				WithCSIParameter(map[string]string{"server": "192.168.20.235", "share": "/models"})))
		applied, err := pipelines.Apply(ctx, apply, metav1.ApplyOptions{FieldManager: manager})
		Expect(err).NotTo(HaveOccurred())
		Expect(applied.Spec.Steps).To(HaveLen(1))
		Expect(applied.Spec.Steps[0].Args).To(HaveKeyWithValue(pipelinev1beta1.ListenPortArg, pipelinev1beta1.ArgValue("9080")))
		Expect(applied.ManagedFields).To(ContainElement(And(
			HaveField("Manager", manager), HaveField("Operation", metav1.ManagedFieldsOperationApply))))

		status := acv1beta1.Pipeline("applied", ns).WithStatus(acv1beta1.PipelineStatus().
			WithPhase(pipelinev1beta1.PipelinePhaseCreating).WithReadySteps("0/1"))
		_, err = pipelines.ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: manager})
		Expect(err).NotTo(HaveOccurred())

		got, err := pipelines.Get(ctx, "applied", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Status.Phase).To(Equal(pipelinev1beta1.PipelinePhaseCreating))
		Expect(got.Status.ReadySteps).To(Equal("0/1"))
		Expect(got.Spec.Steps[0].Image).To(Equal("nginx:latest"), "a status apply leaves the spec alone")
	})
})

var _ = Describe("the generated informers and listers", func() {
	It("see Pipelines created, updated and deleted through the clientset", func(ctx context.Context) {
		ns := newNamespace(ctx)
		pipelines := clientset.DistriInferV1beta1().Pipelines(ns)

		factory := externalversions.NewSharedInformerFactoryWithOptions(clientset, 0, externalversions.WithNamespace(ns))
		informer := factory.DistriInfer().V1beta1().Pipelines()
		lister := informer.Lister()
		var mu sync.Mutex
		var added []string
		_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				mu.Lock()
				defer mu.Unlock()
				added = append(added, obj.(*pipelinev1beta1.Pipeline).Name)
			},
		})
		Expect(err).NotTo(HaveOccurred())

		informerCtx, stop := context.WithCancel(ctx)
		DeferCleanup(func() { stop(); factory.Shutdown() })
		factory.StartWithContext(informerCtx)
		synced := factory.WaitForCacheSyncWithContext(informerCtx)
		Expect(synced.AsError()).To(Succeed())
		Expect(synced.Synced).To(HaveLen(1), "the factory starts the one informer asked for")

		sample, err := samples.PipelineV1beta1(ns)
		Expect(err).NotTo(HaveOccurred())
		_, err = lister.Pipelines(ns).Get(sample.Name)
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "lister before create: %v", err)

		created, err := pipelines.Create(ctx, sample, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		Eventually(func(g Gomega) {
			p, err := lister.Pipelines(ns).Get(sample.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.UID).To(Equal(created.UID))
			g.Expect(p.Spec.Steps).To(HaveLen(2))
		}).Should(Succeed())
		Expect(lister.List(labels.Everything())).To(HaveLen(1))
		Eventually(func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), added...)
		}).Should(Equal([]string{sample.Name}))

		created.Status.Phase = pipelinev1beta1.PipelinePhaseRunning
		_, err = pipelines.UpdateStatus(ctx, created, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			p, err := lister.Pipelines(ns).Get(sample.Name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Status.Phase).To(Equal(pipelinev1beta1.PipelinePhaseRunning))
		}).Should(Succeed())

		Expect(pipelines.Delete(ctx, sample.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() bool {
			_, err := lister.Pipelines(ns).Get(sample.Name)
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
	})
})

var _ = Describe("the generated v1 clientset", func() {
	It("applies a v1 Pipeline that v1beta1 clients read, through the conversion webhook", func(ctx context.Context) {
		ns := newNamespace(ctx)
		applied, err := clientset.DistriInferV1().Pipelines(ns).Apply(ctx, v1Apply(ns), metav1.ApplyOptions{FieldManager: "client-test"})
		Expect(err).NotTo(HaveOccurred())
		Expect(applied.Spec.Steps).To(HaveLen(1))
		Expect(applied.Spec.ModelStorage.NFS).To(HaveValue(HaveField("Path", "/models")))

		old, err := clientset.DistriInferV1beta1().Pipelines(ns).Get(ctx, applied.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(old.Spec.Steps[0].Name).To(Equal("detect"))
		Expect(old.Spec.Steps[0].Port).To(HaveValue(BeEquivalentTo(9080)))
		Expect(old.Spec.ModelStorage.Type).To(Equal(pipelinev1beta1.StorageTypeNFS))
		Expect(old.Spec.ModelStorage.CSIParameter).To(Equal(map[string]string{"server": "192.168.20.235", "share": "/models"}))

		list, err := clientset.DistriInferV1().Pipelines(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(1))
	})
})
