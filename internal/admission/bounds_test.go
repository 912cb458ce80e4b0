package admission

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// bound is a change that takes a Pipeline to one of its bounds (at true) or just over it (at
// false), and what the apiserver says when it is over.
type bound[P any] struct {
	name           string
	edit           func(p P, at bool)
	field, message string
}

// over is n+1 when not at the bound n, n at it.
func over(n int, at bool) int {
	if at {
		return n
	}
	return n + 1
}

// Every field of a Pipeline has a bound, so that the manager, which holds every Pipeline, holds
// no more than the bounds allow. The apiserver refuses a request over one with the field and
// the bound: the CRD's own messages for lengths and counts, the rule's for the fields of the
// Kubernetes types a Pipeline embeds. v1beta1 has the bounds of the v1 fields it converts to,
// so that a v1beta1 request over them is refused in its own terms, before it is converted.
var _ = Describe("The bounds of a Pipeline", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("refuse a v1 Pipeline over them, naming the field and the bound, and admit one at them", func(ctx SpecContext) {
		step := func(p *pipelinev1.Pipeline) *pipelinev1.Step { return &p.Spec.Steps[0] }
		bounds := []bound[*pipelinev1.Pipeline]{
			{"env value", func(p *pipelinev1.Pipeline, at bool) {
				step(p).Env = []corev1.EnvVar{{Name: "CONFIG", Value: strings.Repeat("v", over(32768, at))}}
			}, "spec.steps[0].env", "env values must be at most 32768 characters (32 KiB)"},
			{"env name", func(p *pipelinev1.Pipeline, at bool) {
				step(p).Env = []corev1.EnvVar{{Name: strings.Repeat("N", over(256, at)), Value: "v"}}
			}, "spec.steps[0].env", "env names must be at most 256 characters"},
			{"env valueFrom", func(p *pipelinev1.Pipeline, at bool) {
				step(p).Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: strings.Repeat("k", over(253, at))}}}}
			}, "spec.steps[0].env", "env valueFrom: names and keys must be at most 253 characters"},
			{"env entries", func(p *pipelinev1.Pipeline, at bool) {
				step(p).Env = nil
				for i := range over(128, at) {
					step(p).Env = append(step(p).Env, corev1.EnvVar{Name: fmt.Sprintf("V%d", i), Value: "v"})
				}
			}, "spec.steps[0].env", "must have at most 128 items"},
			{"nodeSelector value", func(p *pipelinev1.Pipeline, at bool) {
				step(p).NodeSelector = map[string]string{"pool": strings.Repeat("a", over(63, at))}
			}, "spec.steps[0].nodeSelector", "nodeSelector keys must be at most 317 characters (a label key) and values at most 63"},
			{"toleration key", func(p *pipelinev1.Pipeline, at bool) {
				step(p).Tolerations = []corev1.Toleration{{Key: strings.Repeat("a", 253) + "/" + strings.Repeat("b", over(63, at)),
					Operator: corev1.TolerationOpExists}}
			}, "spec.steps[0].tolerations", "tolerations: key must be at most 317 characters"},
			{"resource limits", func(p *pipelinev1.Pipeline, at bool) {
				step(p).Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{}}
				for i := range over(16, at) {
					step(p).Resources.Limits[corev1.ResourceName(fmt.Sprintf("example.com/r%d", i))] = resource.MustParse("1")
				}
			}, "spec.steps[0].resources", "resources: at most 16 limits and 16 requests"},
			{"resource claims", func(p *pipelinev1.Pipeline, at bool) {
				step(p).Resources = &corev1.ResourceRequirements{}
				if !at {
					step(p).Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
				}
			}, "spec.steps[0].resources", "resources.claims is not supported"},
			{"gmsaCredentialSpec", func(p *pipelinev1.Pipeline, at bool) {
				step(p).SecurityContext = &corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{
					GMSACredentialSpec: ptr.To(strings.Repeat("c", over(65536, at)))}}
			}, "spec.steps[0].securityContext", "gmsaCredentialSpec at most 65536"},
			{"command items", func(p *pipelinev1.Pipeline, at bool) {
				step(p).Command = make([]string, over(64, at))
				for i := range step(p).Command {
					step(p).Command[i] = "c"
				}
			}, "spec.steps[0].command", "must have at most 64 items"},
			{"args item", func(p *pipelinev1.Pipeline, at bool) {
				step(p).Args = []string{strings.Repeat("a", over(4096, at))}
			}, "spec.steps[0].args[0]", "may not be more than 4096 bytes"},
			{"probe headers", func(p *pipelinev1.Pipeline, at bool) {
				step(p).ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
				for i := range over(16, at) {
					step(p).ReadinessProbe.HTTPGet.HTTPHeaders = append(step(p).ReadinessProbe.HTTPGet.HTTPHeaders,
						corev1.HTTPHeader{Name: fmt.Sprintf("X-H%d", i), Value: "v"})
				}
			}, "spec.steps[0].readinessProbe", "readinessProbe: at most 64 exec.command items and 16 httpGet.httpHeaders"},
			{"probe command", func(p *pipelinev1.Pipeline, at bool) {
				step(p).StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: make([]string, over(64, at))}}}
				for i := range step(p).StartupProbe.Exec.Command {
					step(p).StartupProbe.Exec.Command[i] = "c"
				}
			}, "spec.steps[0].startupProbe", "startupProbe: at most 64 exec.command items"},
			{"probe path", func(p *pipelinev1.Pipeline, at bool) {
				step(p).LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/" + strings.Repeat("p", over(2048, at)-1), Port: intstr.FromString("http")}}}
			}, "spec.steps[0].livenessProbe", "httpGet.path at most 2048 characters"},
			{"pod labels", func(p *pipelinev1.Pipeline, at bool) {
				step(p).PodMetadata = &pipelinev1.StepPodMetadata{Labels: map[string]string{}}
				for i := range over(64, at) {
					step(p).PodMetadata.Labels[fmt.Sprintf("example.com/l%d", i)] = "v"
				}
			}, "spec.steps[0].podMetadata.labels", "must have at most 64 items"},
			{"pod annotation value", func(p *pipelinev1.Pipeline, at bool) {
				step(p).PodMetadata = &pipelinev1.StepPodMetadata{Annotations: map[string]string{"example.com/a": strings.Repeat("v", over(4096, at))}}
			}, "spec.steps[0].podMetadata.annotations", "podMetadata.annotations keys must be at most 317 characters (an annotation key) and values at most 4096"},
			{"runtimeClassName", func(p *pipelinev1.Pipeline, at bool) {
				step(p).RuntimeClassName = dnsName(over(253, at))
			}, "spec.steps[0].runtimeClassName", "may not be more than 253 bytes"},
			{"imagePullSecrets", func(p *pipelinev1.Pipeline, at bool) {
				for i := range over(16, at) {
					step(p).ImagePullSecrets = append(step(p).ImagePullSecrets, corev1.LocalObjectReference{Name: fmt.Sprintf("registry-%d", i)})
				}
			}, "spec.steps[0].imagePullSecrets", "must have at most 16 items"},
			{"imagePullSecrets name", func(p *pipelinev1.Pipeline, at bool) {
				step(p).ImagePullSecrets = []corev1.LocalObjectReference{{Name: dnsName(over(253, at))}}
			}, "spec.steps[0].imagePullSecrets", "imagePullSecrets names must be at most 253 characters"},
			{"terminationGracePeriodSeconds", func(p *pipelinev1.Pipeline, at bool) {
				step(p).TerminationGracePeriodSeconds = ptr.To(int64(over(3600, at)))
			}, "spec.steps[0].terminationGracePeriodSeconds", "should be less than or equal to 3600"},
			{"image", func(p *pipelinev1.Pipeline, at bool) {
				if !at { // no image reference is that long: the webhook refuses those that come near
					step(p).Image = "registry.example.com/" + strings.Repeat("a", 513-len("registry.example.com/"))
				}
			}, "spec.steps[0].image", "may not be more than 512 bytes"},
		}
		for _, b := range bounds {
			By(b.name)
			p := sample(ns)
			b.edit(p, false)
			expectInvalid(k8sClient.Create(ctx, p), b.field, b.message)
			p = sample(ns)
			p.Name = "at-" + strings.ToLower(strings.ReplaceAll(b.name, " ", "-"))
			b.edit(p, true)
			Expect(k8sClient.Create(ctx, p)).To(Succeed(), b.name+" at its bound")
		}
	})

	It("refuse a v1beta1 Pipeline over the bounds of the v1 fields it converts to, in v1beta1's terms", func(ctx SpecContext) {
		step := func(p *pipelinev1beta1.Pipeline) *pipelinev1beta1.Step { return &p.Spec.Steps[0] }
		bounds := []bound[*pipelinev1beta1.Pipeline]{
			{"args key", func(p *pipelinev1beta1.Pipeline, at bool) {
				step(p).Args = map[string]pipelinev1beta1.ArgValue{strings.Repeat("K", over(256, at)): "v"}
			}, "spec.steps[0].args", "args keys must be at most 256 characters"},
			{"env value", func(p *pipelinev1beta1.Pipeline, at bool) {
				step(p).Env = []corev1.EnvVar{{Name: "CONFIG", Value: strings.Repeat("v", over(32768, at))}}
			}, "spec.steps[0].env", "env values must be at most 32768 characters (32 KiB)"},
			{"nfs server", func(p *pipelinev1beta1.Pipeline, at bool) {
				p.Spec.ModelStorage.CSIParameter["server"] = dnsName(over(253, at))
			}, "spec.modelStorage", "csiParameter.server must be at most 253 characters"},
			{"csiParameter value", func(p *pipelinev1beta1.Pipeline, at bool) {
				p.Spec.ModelStorage.Type = pipelinev1beta1.StorageTypeCSI
				p.Spec.ModelStorage.CSIParameter["mountOptions"] = strings.Repeat("o", over(4096, at))
			}, "spec.modelStorage.csiParameter", "csiParameter keys must be at most 253 characters and values at most 4096"},
			{"csi driver", func(p *pipelinev1beta1.Pipeline, at bool) {
				p.Spec.ModelStorage.Type = pipelinev1beta1.StorageTypeCSI
				p.Spec.ModelStorage.CSIParameter["driver"] = dnsName(over(63, at))
			}, "spec.modelStorage", "modelStorage of type csi takes a csiParameter.driver of at most 63 characters"},
			{"router resource claims", func(p *pipelinev1beta1.Pipeline, at bool) {
				p.Spec.Router = &pipelinev1beta1.Router{Enabled: true, Resources: &corev1.ResourceRequirements{}}
				if !at {
					p.Spec.Router.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
				}
			}, "spec.router.resources", "resources.claims is not supported"},
		}
		for _, b := range bounds {
			By(b.name)
			p := sampleV1beta1(ns)
			b.edit(p, false)
			expectInvalid(k8sClient.Create(ctx, p), b.field, b.message)
			p = sampleV1beta1(ns)
			p.Name = "at-" + strings.ToLower(strings.ReplaceAll(b.name, " ", "-"))
			b.edit(p, true)
			Expect(k8sClient.Create(ctx, p)).To(Succeed(), b.name+" at its bound")
			stored := &pipelinev1.Pipeline{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), stored)).To(Succeed(), "read in v1")
		}
	})
})

// dnsName is a DNS name of n characters: labels of at most 63 letters, joined by dots.
func dnsName(n int) string {
	var labels []string
	for n > 0 {
		l := min(n, 63)
		if n-l == 1 {
			l-- // a label of its own for the last letter would need a dot too
		}
		labels = append(labels, strings.Repeat("a", l))
		n -= l + 1
	}
	return strings.Join(labels, ".")
}
