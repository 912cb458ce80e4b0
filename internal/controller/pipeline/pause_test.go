package pipeline

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestPausedAnnotation(t *testing.T) {
	for value, want := range map[string]bool{"true": true, "false": false, "": false, "True": false, "yes": false} {
		p := &pipelinev1.Pipeline{}
		p.Annotations = map[string]string{pipelinev1.PausedAnnotation: value}
		if got := resources.Paused(p); got != want {
			t.Errorf("annotation %q: paused = %v, want %v", value, got, want)
		}
	}
	if resources.Paused(&pipelinev1.Pipeline{}) {
		t.Error("a Pipeline without annotations is paused")
	}
}

func TestPausedStatus(t *testing.T) {
	p := testenv.Sample(t, "ns")
	p.Generation = 3
	p.Status = status.Compute(p, convergedWorld())
	p.Status.ObservedGeneration = 2
	before := p.Status.DeepCopy()

	st := status.PausedStatus(p)
	c := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionReconciled)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != pipelinev1.ReasonPaused || c.ObservedGeneration != 3 {
		t.Fatalf("Reconciled = %+v, want False/Paused for generation 3", c)
	}
	if !status.WasPaused(st) || status.WasPaused(*before) {
		t.Error("wasPaused does not tell the paused status from the one before")
	}
	if st.Phase != before.Phase || st.ObservedGeneration != 2 || st.ReadySteps != before.ReadySteps {
		t.Errorf("phase %q, observedGeneration %d, ready %q changed; want %q, 2, %q",
			st.Phase, st.ObservedGeneration, st.ReadySteps, before.Phase, before.ReadySteps)
	}
	for _, typ := range []string{pipelinev1.ConditionAvailable, pipelinev1.ConditionProgressing, pipelinev1.ConditionDegraded} {
		if !equality.Semantic.DeepEqual(meta.FindStatusCondition(st.Conditions, typ), meta.FindStatusCondition(before.Conditions, typ)) {
			t.Errorf("condition %s changed while paused", typ)
		}
	}
	if !equality.Semantic.DeepEqual(p.Status, *before) {
		t.Error("pausedStatus modified the Pipeline's status")
	}

	p.Status = st
	if again := status.PausedStatus(p); !equality.Semantic.DeepEqual(again, st) {
		t.Error("a second paused pass changes the status: it would write on every pass")
	}
}

// pausedNotes counts the notes recorded on p that announce a pause.
func pausedNotes(notes []string) int {
	n := 0
	for _, note := range notes {
		if strings.HasPrefix(note, pipelinev1.ReasonPaused+": ") {
			n++
		}
	}
	return n
}

func setPaused(ctx context.Context, p *pipelinev1.Pipeline, paused bool) {
	GinkgoHelper()
	updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
		if paused {
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, pipelinev1.PausedAnnotation, "true")
		} else {
			delete(p.Annotations, pipelinev1.PausedAnnotation)
		}
	})
}

var _ = Describe("A paused Pipeline", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("keeps its children as they are until it is resumed, then converges", func() {
		p := runningSample(ctx, ns)

		By("pausing: Reconciled turns False for reason Paused, the phase stays, one event")
		setPaused(ctx, p, true)
		Eventually(func() string { return condition(ctx, p, pipelinev1.ConditionReconciled)().Reason }).
			Should(Equal(pipelinev1.ReasonPaused))
		Expect(getPipeline(ctx, p).Status.Phase).To(Equal(pipelinev1.PipelinePhaseRunning))
		Eventually(func() int { return pausedNotes(eventNotes(ctx, p)()) }).Should(Equal(1))

		By("editing a child, deleting another and changing the spec")
		d := deploymentOf(ctx, p, 0)
		d.Spec.Template.Spec.Containers[0].Image = "busybox:edited"
		Expect(k8sClient.Update(ctx, d, client.FieldOwner("kubectl-edit"))).To(Succeed())
		svc := serviceOf(ctx, p, 1)
		Expect(k8sClient.Delete(ctx, svc)).To(Succeed())
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Image = "nginx:1.27" })
		edited := getPipeline(ctx, p)
		// The reconciler saw the new generation: its Reconciled condition follows it.
		Eventually(func() int64 { return condition(ctx, p, pipelinev1.ConditionReconciled)().ObservedGeneration }).
			Should(Equal(edited.Generation))

		By("nothing is repaired or applied")
		Consistently(func(g Gomega) {
			g.Expect(deploymentOf(ctx, p, 0).Spec.Template.Spec.Containers[0].Image).To(Equal("busybox:edited"))
			g.Expect(deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:latest"))
			g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}))).To(BeTrue())
		}, "1500ms").Should(Succeed())
		st := getPipeline(ctx, p).Status
		Expect(st.Phase).To(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(st.ObservedGeneration).To(BeNumerically("<", edited.Generation))
		Expect(pausedNotes(eventNotes(ctx, p)())).To(Equal(1))

		By("resuming: drift is repaired and the spec applied")
		setPaused(ctx, p, false)
		Eventually(func(g Gomega) {
			g.Expect(deploymentOf(ctx, p, 0).Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:latest"))
			g.Expect(deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:1.27"))
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{})).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			st := getPipeline(ctx, p).Status
			g.Expect(st.ObservedGeneration).To(Equal(edited.Generation))
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, pipelinev1.ConditionReconciled)).To(BeTrue())
		}).Should(Succeed())
		Eventually(eventNotes(ctx, p)).Should(ContainElement(HavePrefix("Resumed: ")))
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(pausedNotes(eventNotes(ctx, p)())).To(Equal(1))
	})

	It("is still cleaned up when deleted", func() {
		p := runningSample(ctx, ns)
		setPaused(ctx, p, true)
		Eventually(func() string { return condition(ctx, p, pipelinev1.ConditionReconciled)().Reason }).
			Should(Equal(pipelinev1.ReasonPaused))
		pv := resources.PVName(p)
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		Eventually(func() bool { return gone(ctx, &pipelinev1.Pipeline{}, ns, p.Name) }).Should(BeTrue())
		Eventually(func() bool { return gone(ctx, &corev1.PersistentVolume{}, "", pv) }).Should(BeTrue())
	})
})
