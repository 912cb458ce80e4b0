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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// A Pipeline is paused by spec.paused true, or by the annotation v1beta1 spells it with,
// written on the v1 object itself; by nothing else.
func TestIsPaused(t *testing.T) {
	for _, tc := range []struct {
		paused *bool
		want   bool
	}{{ptr.To(true), true}, {ptr.To(false), false}, {nil, false}} {
		p := &pipelinev1.Pipeline{Spec: pipelinev1.PipelineSpec{Paused: tc.paused}}
		if got := p.IsPaused(); got != tc.want {
			t.Errorf("spec.paused %v: paused = %v, want %v", ptr.Deref(tc.paused, false), got, tc.want)
		}
	}
	for value, want := range map[string]bool{"true": true, "false": false, "": false, "True": false, "yes": false} {
		p := &pipelinev1.Pipeline{}
		p.Annotations = map[string]string{pipelinev1.PausedAnnotation: value}
		if got := p.IsPaused(); got != want {
			t.Errorf("annotation %q: paused = %v, want %v", value, got, want)
		}
	}
	both := &pipelinev1.Pipeline{Spec: pipelinev1.PipelineSpec{Paused: ptr.To(false)}}
	both.Annotations = map[string]string{pipelinev1.PausedAnnotation: "true"}
	if !both.IsPaused() {
		t.Error("spec.paused false resumes a Pipeline the annotation still pauses")
	}
	if (&pipelinev1.Pipeline{}).IsPaused() {
		t.Error("a Pipeline without spec.paused and annotations is paused")
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
	if st.Phase != before.Phase || st.ObservedGeneration != 2 || !ptr.Equal(st.ReadySteps, before.ReadySteps) {
		t.Errorf("phase %q, observedGeneration %d, ready %d changed; want %q, 2, %d",
			st.Phase, st.ObservedGeneration, ptr.Deref(st.ReadySteps, -1), before.Phase, ptr.Deref(before.ReadySteps, -1))
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

// setPaused pauses p with spec.paused true, or removes spec.paused.
func setPaused(ctx context.Context, p *pipelinev1.Pipeline, paused bool) {
	GinkgoHelper()
	updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
		if paused {
			p.Spec.Paused = ptr.To(true)
		} else {
			p.Spec.Paused = nil
		}
	})
}

// setPausedAnnotation pauses p the way v1beta1 does, with the annotation PausedAnnotation "true"
// (written here on the v1 object), or removes the annotation.
func setPausedAnnotation(ctx context.Context, p *pipelinev1.Pipeline, paused bool) {
	GinkgoHelper()
	updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
		if paused {
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, pipelinev1.PausedAnnotation, "true")
		} else {
			delete(p.Annotations, pipelinev1.PausedAnnotation)
		}
	})
}

// reconciledReason is the reason of the Reconciled condition of p.
func reconciledReason(ctx context.Context, p *pipelinev1.Pipeline) func() string {
	return func() string { return orEmpty(condition(ctx, p, pipelinev1.ConditionReconciled)()).Reason }
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
		resumed := getPipeline(ctx, p)
		Expect(resumed.Generation).To(BeNumerically(">", edited.Generation), "spec.paused is part of the spec")
		Eventually(func(g Gomega) {
			g.Expect(deploymentOf(ctx, p, 0).Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:latest"))
			g.Expect(deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:1.27"))
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{})).To(Succeed())
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			st := getPipeline(ctx, p).Status
			g.Expect(st.ObservedGeneration).To(Equal(resumed.Generation))
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, pipelinev1.ConditionReconciled)).To(BeTrue())
		}).Should(Succeed())
		Eventually(eventNotes(ctx, p)).Should(ContainElement(HavePrefix("Resumed: ")))
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		Expect(pausedNotes(eventNotes(ctx, p)())).To(Equal(1))
	})

	It("is also paused by the annotation distri-infer.ndsl.cn/paused, and resumes only once both it and spec.paused are gone", func() {
		p := runningSample(ctx, ns)

		By("pausing with the annotation alone, written on the v1 object")
		setPausedAnnotation(ctx, p, true)
		Eventually(reconciledReason(ctx, p)).Should(Equal(pipelinev1.ReasonPaused))
		Expect(getPipeline(ctx, p).Spec.Paused).To(BeNil(), "the annotation does not turn into the field")
		Eventually(eventNotes(ctx, p)).Should(ContainElement(ContainSubstring(pipelinev1.PausedAnnotation)))

		By("setting spec.paused as well, with a spec change")
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) {
			p.Spec.Paused = ptr.To(true)
			p.Spec.Steps[1].Image = "nginx:1.27"
		})
		edited := getPipeline(ctx, p)
		Eventually(func() int64 { return condition(ctx, p, pipelinev1.ConditionReconciled)().ObservedGeneration }).
			Should(Equal(edited.Generation))

		By("removing the annotation: spec.paused still pauses it")
		setPausedAnnotation(ctx, p, false)
		Consistently(func(g Gomega) {
			g.Expect(deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:latest"))
			g.Expect(reconciledReason(ctx, p)()).To(Equal(pipelinev1.ReasonPaused))
		}, "1500ms").Should(Succeed())

		By("adding the annotation again and removing spec.paused: the annotation still pauses it")
		setPausedAnnotation(ctx, p, true)
		updatePipeline(ctx, p, func(p *pipelinev1.Pipeline) { p.Spec.Paused = ptr.To(false) })
		resumedSpec := getPipeline(ctx, p)
		Eventually(func() int64 { return condition(ctx, p, pipelinev1.ConditionReconciled)().ObservedGeneration }).
			Should(Equal(resumedSpec.Generation))
		Consistently(func(g Gomega) {
			g.Expect(deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image).To(Equal("nginx:latest"))
			g.Expect(reconciledReason(ctx, p)()).To(Equal(pipelinev1.ReasonPaused))
		}, "1500ms").Should(Succeed())
		Expect(getPipeline(ctx, p).Status.ObservedGeneration).To(BeNumerically("<", edited.Generation))

		By("removing the annotation too: the spec is applied")
		setPausedAnnotation(ctx, p, false)
		Eventually(func() string { return deploymentOf(ctx, p, 1).Spec.Template.Spec.Containers[0].Image }).Should(Equal("nginx:1.27"))
		Eventually(func(g Gomega) {
			st := getPipeline(ctx, p).Status
			g.Expect(st.ObservedGeneration).To(Equal(resumedSpec.Generation))
			g.Expect(meta.IsStatusConditionTrue(st.Conditions, pipelinev1.ConditionReconciled)).To(BeTrue())
		}).Should(Succeed())
		Eventually(eventNotes(ctx, p)).Should(ContainElement(HavePrefix("Resumed: ")))
		Expect(pausedNotes(eventNotes(ctx, p)())).To(Equal(1), "one pause, however it was asked for")
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
