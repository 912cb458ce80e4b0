package pipeline

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// The tests here run the reconciler against the real apiserver in the situations that go wrong
// in clusters: caches that lag, copies that are outdated, objects someone else holds or
// changes, writes the apiserver refuses.

// directReconciler is a reconciler that reads and writes the apiserver directly, with wrap
// around its client (the cache of a manager), for Pipelines the suite's manager leaves alone.
func directReconciler(funcs interceptor.Funcs) (*Reconciler, *events.FakeRecorder) {
	GinkgoHelper()
	direct, err := client.NewWithWatch(cfg, client.Options{Scheme: testScheme})
	Expect(err).NotTo(HaveOccurred())
	recorder := events.NewFakeRecorder(100)
	return &Reconciler{Client: interceptor.NewClient(direct, funcs), APIReader: direct, Recorder: recorder}, recorder
}

func reconcileOnce(ctx context.Context, r *Reconciler, p *pipelinev1.Pipeline) (ctrl.Result, error) {
	return r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(p)})
}

// recorded drains the events a fake recorder holds.
func recorded(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

var _ = Describe("Pipeline reconciler under faults", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("takes its child's name back once someone else's object that held it is deleted", func() {
		foreign := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "facedetection-pipeline-step-2", Namespace: ns},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}},
		}
		Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
		p := createSample(ctx, ns)
		Eventually(func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionDegraded)()).Reason }).
			Should(Equal(pipelinev1.ReasonNameConflict))

		// Once the Pipeline is quiet, no event of its own would start another pass.
		Consistently(func() string { return getPipeline(ctx, p).ResourceVersion }, 2*time.Second).
			Should(Equal(getPipeline(ctx, p).ResourceVersion))
		Expect(k8sClient.Delete(ctx, foreign)).To(Succeed())
		Eventually(func(g Gomega) {
			svc := &corev1.Service{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(foreign), svc)).To(Succeed())
			g.Expect(metav1.IsControlledBy(svc, getPipeline(ctx, p))).To(BeTrue())
		}, 2*conflictRecheckInterval).Should(Succeed())
		Eventually(func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionDegraded)()).Reason }).
			Should(Equal(pipelinev1.ReasonAsExpected))
	})

	It("deletes the volume of a Pipeline deleted before its cache showed the volume", func() {
		// The cache has not seen the volume yet: lists of volumes through it are empty.
		r, _ := directReconciler(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*corev1.PersistentVolumeList); ok {
					return nil
				}
				return c.List(ctx, list, opts...)
			},
		})
		p := createSample(ctx, ns, forOwnManagers(ns))
		for range 2 { // finalizer, then children
			_, err := reconcileOnce(ctx, r, p)
			Expect(err).NotTo(HaveOccurred())
		}
		pv := child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))

		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		_, err := reconcileOnce(ctx, r, p)
		Expect(err).NotTo(HaveOccurred())
		Expect(gone(ctx, &pipelinev1.Pipeline{}, ns, p.Name)).To(BeTrue())
		Expect(gone(ctx, &corev1.PersistentVolume{}, "", pv.Name)).To(BeTrue(), "the volume was left behind")
	})

	It("reads a child its cache has not shown into an empty object, and so sees what the server's copy lacks", func() {
		r, _ := directReconciler(interceptor.Funcs{})
		p := createSample(ctx, ns, forOwnManagers(ns))
		for range 2 { // finalizer, then children
			_, err := reconcileOnce(ctx, r, p)
			Expect(err).NotTo(HaveOccurred())
		}
		// Someone removes a label the operator sets.
		svc := serviceOf(ctx, p, 1)
		Expect(k8sClient.Patch(ctx, svc, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/labels/step"}]`)))).To(Succeed())

		// A cache that has not seen the Services: their creates are refused as already existing.
		notCached, _ := directReconciler(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Service); ok {
					return apierrors.NewNotFound(corev1.Resource("services"), key.Name)
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
		_, err := reconcileOnce(ctx, notCached, p)
		Expect(err).NotTo(HaveOccurred())
		Expect(serviceOf(ctx, p, 1).Labels).To(HaveKeyWithValue(resources.LabelStep, "2"))
	})

	It("writes no status and records no event from an outdated copy of the Pipeline", func() {
		foreign := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "facedetection-pipeline-step-1", Namespace: ns},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}},
		}
		Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
		p := createSample(ctx, ns, forOwnManagers(ns))
		var stale *pipelinev1.Pipeline
		r, recorder := directReconciler(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if pl, ok := obj.(*pipelinev1.Pipeline); ok && stale != nil {
					stale.DeepCopyInto(pl)
					return nil
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
		_, err := reconcileOnce(ctx, r, p) // finalizer
		Expect(err).NotTo(HaveOccurred())
		stale = getPipeline(ctx, p) // the copy of a cache that will not see the next status write
		_, err = reconcileOnce(ctx, r, p)
		Expect(err).NotTo(HaveOccurred())
		written := getPipeline(ctx, p)
		Expect(written.Status.Phase).To(Equal(pipelinev1.PipelinePhaseFailed))
		Expect(recorded(recorder)).To(ContainElement(ContainSubstring(pipelinev1.ReasonNameConflict)))

		// The next pass starts from the outdated copy: it computes the same change again.
		result, err := reconcileOnce(ctx, r, p)
		Expect(err).NotTo(HaveOccurred(), "a conflict from an outdated copy is no error")
		Expect(result.RequeueAfter).To(Equal(conflictRetryInterval), "the pass runs again even if no event comes")
		Expect(recorded(recorder)).NotTo(ContainElement(ContainSubstring(pipelinev1.ReasonNameConflict)),
			"the Degraded event was recorded twice for one change")
		Expect(getPipeline(ctx, p).ResourceVersion).To(Equal(written.ResourceVersion))
	})

	It("never drops a finalizer someone else added while it added its own", func() {
		p := createSample(ctx, ns, forOwnManagers(ns))
		stale := getPipeline(ctx, p)
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { controllerutil.AddFinalizer(p, "example.com/keep") })
		r, _ := directReconciler(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if pl, ok := obj.(*pipelinev1.Pipeline); ok && stale != nil {
					stale.DeepCopyInto(pl)
					stale = nil // one outdated read, then the apiserver's copy
					return nil
				}
				return c.Get(ctx, key, obj, opts...)
			},
		})
		_, err := reconcileOnce(ctx, r, p)
		Expect(err).NotTo(HaveOccurred())
		Expect(getPipeline(ctx, p).Finalizers).To(ContainElement("example.com/keep"))
		_, err = reconcileOnce(ctx, r, p)
		Expect(err).NotTo(HaveOccurred())
		Expect(getPipeline(ctx, p).Finalizers).To(ConsistOf("example.com/keep", Finalizer))
	})

	It("turns a panic in a step's goroutine into an error of the pass", func() {
		r, _ := directReconciler(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*corev1.Service); ok {
					panic("injected")
				}
				return c.Create(ctx, obj, opts...)
			},
		})
		p := createSample(ctx, ns, forOwnManagers(ns))
		_, err := reconcileOnce(ctx, r, p) // finalizer
		Expect(err).NotTo(HaveOccurred())
		_, err = reconcileOnce(ctx, r, p)
		Expect(err).To(MatchError(ContainSubstring("panic in step step-1: injected")))
		rec := condition(ctx, p, pipelinev1.ConditionReconciled)()
		Expect(rec.Status).To(Equal(metav1.ConditionFalse))
		Expect(rec.Message).To(ContainSubstring("panic in step"))
	})

	It("leaves someone else's list entries alone without rewriting the child on every pass", func() {
		p := runningSample(ctx, ns)
		Consistently(func() string { return getPipeline(ctx, p).ResourceVersion }).Should(Equal(p.ResourceVersion))
		d := deploymentOf(ctx, p, 0)
		patch := client.StrategicMergeFrom(d.DeepCopy())
		c := &d.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "INJECTED_BY_POLICY", Value: "1"})
		Expect(k8sClient.Patch(ctx, d, patch, client.FieldOwner("policy-engine"))).To(Succeed())
		Consistently(func() string { return deploymentOf(ctx, p, 0).ResourceVersion }).Should(Equal(d.ResourceVersion))
		p = getPipeline(ctx, p)

		expectNoWritesOnReconcile(ctx, p)
		Expect(envOf(deploymentOf(ctx, p, 0))).To(HaveKeyWithValue("INJECTED_BY_POLICY", "1"))
	})

	It("reports a volume it cannot delete, and deletes it once it can, even after its finalizer was removed by hand", func() {
		p := runningSample(ctx, ns)
		old := child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))
		denyVolumeDeletes(ctx, ns)

		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			st := getPipeline(ctx, p).Status
			g.Expect(st.Phase).To(Equal(pipelinev1.PipelinePhaseDeleting))
			rec := orEmpty(meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionReconciled))
			g.Expect(rec.Reason).To(Equal(pipelinev1.ReasonDeleteFailed))
			g.Expect(rec.Message).To(ContainSubstring("delete PersistentVolume " + old.Name))
			g.Expect(rec.Message).To(ContainSubstring("keeps its finalizer"))
		}).Should(Succeed())
		Eventually(eventNotes(ctx, p)).Should(ContainElement(ContainSubstring("DeleteFailed: Failed to delete PersistentVolume " + old.Name)))

		By("removing the finalizer by hand, which the troubleshooting guide warns against")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { controllerutil.RemoveFinalizer(p, Finalizer) })
		Eventually(func() bool { return gone(ctx, &pipelinev1.Pipeline{}, ns, p.Name) }).Should(BeTrue())
		Consistently(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", old.Name) }, 2*time.Second).Should(BeFalse())

		By("allowing volume deletes again: the volume of the Pipeline that is gone goes too")
		allowVolumeDeletes(ctx, ns)
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", old.Name) }, time.Minute).Should(BeTrue())
	})

	It("replaces a volume Released by its deleted claim instead of taking it over", func() {
		p := runningSample(ctx, ns)
		old := child(ctx, &corev1.PersistentVolume{}, "", resources.PVName(p))

		By("playing someone who deletes the claim, and the volume binder, which releases the volume")
		releaseVolume(ctx, p, old)

		Eventually(func(g Gomega) {
			pv := &corev1.PersistentVolume{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: old.Name}, pv)).To(Succeed())
			if pv.UID == old.UID {
				// Play the pv-protection controller: a Released volume is in use by no claim.
				g.Expect(pv.DeletionTimestamp).NotTo(BeNil(), "the Released volume was kept")
				controllerutil.RemoveFinalizer(pv, "kubernetes.io/pv-protection")
				g.Expect(k8sClient.Update(ctx, pv)).To(Succeed())
			}
			g.Expect(pv.UID).NotTo(Equal(old.UID))
			g.Expect(pv.Spec.ClaimRef.UID).To(BeEmpty())
		}).Should(Succeed())
		Eventually(eventNotes(ctx, p)).Should(ContainElement(ContainSubstring("VolumeReleased: PersistentVolume " + old.Name + " is Released")))
		bindStorage(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
	})
})

// orEmpty returns c, or an empty condition when c is nil, so that assertions on it fail instead
// of panicking.
func orEmpty(c *metav1.Condition) *metav1.Condition {
	if c == nil {
		return &metav1.Condition{}
	}
	return c
}

// denyVolumeDeletes makes the apiserver refuse deletes of the PersistentVolumes of Pipelines in
// ns, with a ValidatingAdmissionPolicy, and waits until it does.
func denyVolumeDeletes(ctx context.Context, ns string) {
	GinkgoHelper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-volume-deletes-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"persistentvolumes"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "volumes are kept by policy"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{ObjectSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{resources.LabelPipelineNamespace: ns},
			}},
		},
	}
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	Expect(k8sClient.Create(ctx, binding)).To(Succeed())

	probe := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-" + ns, Labels: map[string]string{resources.LabelPipelineNamespace: ns}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/probe"}},
		},
	}
	Expect(k8sClient.Create(ctx, probe)).To(Succeed())
	Eventually(func() error { return k8sClient.Delete(ctx, probe, client.DryRunAll) }).Should(MatchError(ContainSubstring("volumes are kept by policy")))
	DeferCleanup(func(ctx context.Context) {
		allowVolumeDeletes(ctx, ns)
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, probe))).To(Succeed())
	})
}

// allowVolumeDeletes removes what denyVolumeDeletes made and waits until deletes pass again.
func allowVolumeDeletes(ctx context.Context, ns string) {
	GinkgoHelper()
	name := "deny-volume-deletes-" + ns
	Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
	Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
	Eventually(func() error {
		err := k8sClient.Delete(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + ns}}, client.DryRunAll)
		return client.IgnoreNotFound(err)
	}).Should(Succeed())
}

// releaseVolume plays someone who deletes p's claim (and the controller that removes the claim's
// protection finalizer), then the volume binder: the volume becomes Released, still naming the
// deleted claim.
func releaseVolume(ctx context.Context, p *pipelinev1.Pipeline, pv *corev1.PersistentVolume) {
	GinkgoHelper()
	pvc := child(ctx, &corev1.PersistentVolumeClaim{}, p.Namespace, resources.ClaimName(p))
	Expect(k8sClient.Delete(ctx, pvc)).To(Succeed())
	Eventually(func() error {
		current := &corev1.PersistentVolumeClaim{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pvc), current); err != nil || current.UID != pvc.UID {
			return client.IgnoreNotFound(err)
		}
		controllerutil.RemoveFinalizer(current, "kubernetes.io/pvc-protection")
		if err := k8sClient.Update(ctx, current); err != nil {
			return err
		}
		return fmt.Errorf("claim %s still exists", pvc.Name)
	}).Should(Succeed())
	Eventually(func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(pv), pv); err != nil {
			return err
		}
		pv.Spec.ClaimRef.UID = pvc.UID
		if err := k8sClient.Update(ctx, pv); err != nil {
			return err
		}
		pv.Status.Phase = corev1.VolumeReleased
		return k8sClient.Status().Update(ctx, pv)
	}).Should(Succeed())
}
