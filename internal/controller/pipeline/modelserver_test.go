package pipeline

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// withModelServerSteps gives every step of a Pipeline the fields a model server needs.
func withModelServerSteps(p *pipelinev1.Pipeline) {
	for i := range p.Spec.Steps {
		p.Spec.Steps[i] = testenv.ModelServerStep(p.Spec.Steps[i])
	}
}

// expectModelServerPod checks that the pod template of d is what step s, set by
// testenv.ModelServerStep, asks for.
func expectModelServerPod(d *appsv1.Deployment, s pipelinev1.Step) {
	GinkgoHelper()
	t := d.Spec.Template
	pod, c := t.Spec, t.Spec.Containers[0]
	Expect(c.Command).To(Equal(s.Command))
	Expect(c.Args).To(Equal(s.Args))
	// The apiserver defaults what a probe leaves out (timeouts, thresholds, the scheme).
	for _, probe := range []struct{ got, want *corev1.Probe }{{c.ReadinessProbe, s.ReadinessProbe},
		{c.LivenessProbe, s.LivenessProbe}, {c.StartupProbe, s.StartupProbe}} {
		Expect(probe.got).NotTo(BeNil())
		Expect(probe.got.Exec).To(Equal(probe.want.Exec))
		Expect(probe.got.TCPSocket).To(Equal(probe.want.TCPSocket))
		if probe.want.HTTPGet != nil {
			Expect(probe.got.HTTPGet.Path).To(Equal(probe.want.HTTPGet.Path))
			Expect(probe.got.HTTPGet.Port).To(Equal(probe.want.HTTPGet.Port))
		}
		if probe.want.PeriodSeconds != 0 {
			Expect(probe.got.PeriodSeconds).To(Equal(probe.want.PeriodSeconds))
		}
		if probe.want.FailureThreshold != 0 {
			Expect(probe.got.FailureThreshold).To(Equal(probe.want.FailureThreshold))
		}
	}
	for k, v := range s.PodMetadata.Labels {
		Expect(t.Labels).To(HaveKeyWithValue(k, v))
		Expect(d.Labels).NotTo(HaveKey(k), "the Deployment itself")
	}
	for k, v := range d.Labels {
		Expect(t.Labels).To(HaveKeyWithValue(k, v), "the operator's labels stay on the pods")
	}
	Expect(t.Annotations).To(Equal(s.PodMetadata.Annotations))
	Expect(pod.RuntimeClassName).To(Equal(ptr.To(s.RuntimeClassName)))
	Expect(pod.ImagePullSecrets).To(Equal(s.ImagePullSecrets))
	Expect(pod.TerminationGracePeriodSeconds).To(Equal(s.TerminationGracePeriodSeconds))
	Expect(pod.Volumes).To(HaveLen(2))
	Expect(pod.Volumes[0].Name).To(Equal(resources.ModelVolumeName))
	shm := pod.Volumes[1]
	Expect(shm.Name).To(Equal(resources.SharedMemoryVolumeName))
	Expect(shm.EmptyDir).NotTo(BeNil())
	Expect(shm.EmptyDir.Medium).To(Equal(corev1.StorageMediumMemory))
	Expect(shm.EmptyDir.SizeLimit.Cmp(*s.SharedMemorySize)).To(BeZero())
	Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: resources.SharedMemoryVolumeName, MountPath: "/dev/shm"}))
}

var _ = Describe("Steps with the fields of a model server", func() {
	ctx := context.Background()

	It("reach the step's pods as written, converge, and cost no write once converged, nor after a restart", func() {
		ns := newNamespace(ctx)
		m := startOwnManager(ns, ownManagerOptions{})
		p := runningSample(ctx, ns, forOwnManagers(ns), withModelServerSteps)
		for i := range p.Spec.Steps {
			expectModelServerPod(deploymentOf(ctx, p, i), p.Spec.Steps[i])
		}
		settled := func() map[string]string {
			GinkgoHelper()
			before := versionsIn(ctx, ns, p)
			Consistently(func() map[string]string { return versionsIn(ctx, ns, p) }).Should(Equal(before))
			return before
		}
		converged := settled()

		By("starting passes over the converged Pipeline: none writes")
		writes, passes := m.counter.writes.Load(), m.passes.Load()
		for _, value := range []string{"1", "2"} {
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"test.example.com/poke": value}}})
			Expect(err).NotTo(HaveOccurred())
			Expect(k8sClient.Patch(ctx, getPipeline(ctx, p), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		}
		Eventually(m.passes.Load).Should(BeNumerically(">", passes))
		Consistently(m.counter.writes.Load).Should(Equal(writes), "a Pipeline with podMetadata is not applied again on every pass")
		for i := range p.Spec.Steps {
			d := deploymentOf(ctx, p, i)
			Expect(d.ResourceVersion).To(Equal(converged["*v1.Deployment "+d.Name]))
		}

		By("a pod label of the step changed by someone else is put back, once")
		d := deploymentOf(ctx, p, 0)
		d.Spec.Template.Labels["team"] = "audio"
		Expect(k8sClient.Update(ctx, d)).To(Succeed())
		Eventually(func() string { return deploymentOf(ctx, p, 0).Spec.Template.Labels["team"] }).Should(Equal("vision"))
		rollOut(ctx, p)
		Eventually(phase(ctx, p)).Should(Equal(pipelinev1.PipelinePhaseRunning))
		repaired := settled()
		writes = m.counter.writes.Load()
		Consistently(m.counter.writes.Load).Should(Equal(writes), "repaired once, not rewritten on every pass")

		By("starting a fresh manager: its cache, built from the children as they are, holds them up to date")
		m.stop()
		second := startOwnManager(ns, ownManagerOptions{})
		Eventually(second.passes.Load).Should(BeNumerically(">=", 1))
		Consistently(second.counter.writes.Load).Should(BeZero())
		Expect(versionsIn(ctx, ns, p)).To(Equal(repaired))
	})

	// The sample is the seed made in v1beta1, whose first step has an arg: written back through
	// v1beta1 it keeps that arg first in its container's environment, and its pods stay.
	It("keep every field when the Pipeline is read in v1beta1 and written back", func() {
		ns := newNamespace(ctx)
		p := runningSample(ctx, ns, withModelServerSteps)
		Consistently(func() string { return getPipeline(ctx, p).ResourceVersion }).Should(Equal(p.ResourceVersion))
		deployments := map[string]string{}
		for i := range p.Spec.Steps {
			d := deploymentOf(ctx, p, i)
			deployments[d.Name] = d.ResourceVersion
		}

		By("reading it in v1beta1, which has none of the fields, and writing it back as it was read")
		updateInV1beta1 := func(edit func(*pipelinev1beta1.Pipeline)) {
			GinkgoHelper()
			Eventually(func() error {
				old := &pipelinev1beta1.Pipeline{}
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(p), old); err != nil {
					return err
				}
				Expect(old.Spec.Steps[0].Args).To(HaveKeyWithValue("listenPort", pipelinev1beta1.ArgValue("9080")))
				Expect(old.Annotations).To(HaveKey(pipelinev1.ConversionDataAnnotation))
				edit(old)
				return k8sClient.Update(ctx, old)
			}).Should(Succeed())
		}
		updateInV1beta1(func(*pipelinev1beta1.Pipeline) {})
		now := getPipeline(ctx, p)
		Expect(equality.Semantic.DeepEqual(now.Spec, p.Spec)).To(BeTrue(), "the v1 spec after a v1beta1 update")
		Expect(now.Generation).To(Equal(p.Generation))

		By("and with a label of its own added in v1beta1")
		updateInV1beta1(func(old *pipelinev1beta1.Pipeline) { old.Labels = map[string]string{"team": "vision"} })
		now = getPipeline(ctx, p)
		Expect(now.Labels).To(HaveKeyWithValue("team", "vision"))
		Expect(equality.Semantic.DeepEqual(now.Spec, p.Spec)).To(BeTrue(), "the v1 spec after a v1beta1 update of a label")
		Expect(now.Spec.Steps[0].SharedMemorySize.Cmp(resource.MustParse("2Gi"))).To(BeZero())
		Expect(now.Annotations).To(Equal(p.Annotations), "the conversion data of the seed's args, and nothing more")

		By("the children are as they were")
		Consistently(func() map[string]string {
			out := map[string]string{}
			for i := range p.Spec.Steps {
				d := deploymentOf(ctx, p, i)
				out[d.Name] = d.ResourceVersion
			}
			return out
		}).Should(Equal(deployments))
	})
})
