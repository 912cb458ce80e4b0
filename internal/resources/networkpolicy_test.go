package resources

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestDesiredStepsNetworkPolicy(t *testing.T) {
	stepPods := map[string]string{"pipeline": "facedetection-pipeline", "app.kubernetes.io/name": "pipeline-step",
		"app.kubernetes.io/managed-by": "pipeline-operator"}
	notTheEntry := []metav1.LabelSelectorRequirement{{Key: "step", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"1"}}}
	routerPods := map[string]string{"pipeline": "facedetection-pipeline", "app.kubernetes.io/component": "router",
		"app.kubernetes.io/name": "pipeline-router"}
	tcp := func(ports ...int32) []networkingv1.NetworkPolicyPort {
		out := make([]networkingv1.NetworkPolicyPort, 0, len(ports))
		for _, p := range ports {
			out = append(out, networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(p))})
		}
		return out
	}
	port := func(i int, port int32) func(*pipelinev1.Pipeline) {
		return func(p *pipelinev1.Pipeline) { p.Spec.Steps[i].Port = ptr.To(port) }
	}
	addStep := func(name string, port int32) func(*pipelinev1.Pipeline) {
		return func(p *pipelinev1.Pipeline) {
			s := p.Spec.Steps[1]
			s.Name, s.Port = name, ptr.To(port)
			p.Spec.Steps = append(p.Spec.Steps, s)
		}
	}
	router := func(p *pipelinev1.Pipeline) {
		p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter}
	}
	tests := []struct {
		name     string
		edits    []func(*pipelinev1.Pipeline)
		selected metav1.LabelSelector
		from     map[string]string
		ports    []networkingv1.NetworkPolicyPort
	}{{
		name:     "chain: the steps after the first, from the Pipeline's steps, on the second step's port",
		selected: metav1.LabelSelector{MatchLabels: stepPods, MatchExpressions: notTheEntry},
		from:     stepPods,
		ports:    tcp(80),
	}, {
		name:     "chain: the ports of every inner step, sorted and each once; not the entry's",
		edits:    []func(*pipelinev1.Pipeline){addStep("step-3", 9090), addStep("step-4", 80), port(0, 7000)},
		selected: metav1.LabelSelector{MatchLabels: stepPods, MatchExpressions: notTheEntry},
		from:     stepPods,
		ports:    tcp(80, 9090),
	}, {
		name:     "chain: the entry's port follows the step that is first",
		edits:    []func(*pipelinev1.Pipeline){func(p *pipelinev1.Pipeline) { p.Spec.Steps[0], p.Spec.Steps[1] = p.Spec.Steps[1], p.Spec.Steps[0] }},
		selected: metav1.LabelSelector{MatchLabels: stepPods, MatchExpressions: notTheEntry},
		from:     stepPods,
		ports:    tcp(9080),
	}, {
		name:     "router: every step, from the router's pods, on every step's port",
		edits:    []func(*pipelinev1.Pipeline){router},
		selected: metav1.LabelSelector{MatchLabels: stepPods},
		from:     routerPods,
		ports:    tcp(80, 9080),
	}, {
		// The router calls a gRPC step at its Service's port, as any other.
		name: "router: a step of the Open Inference Protocol's gRPC service, on its port",
		edits: []func(*pipelinev1.Pipeline){router, port(1, 8001), func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[1].Protocol = pipelinev1.StepProtocolOpenInferenceGRPC
		}},
		selected: metav1.LabelSelector{MatchLabels: stepPods},
		from:     routerPods,
		ports:    tcp(8001, 9080),
	}, {
		name:     "router: a single step is not the entry either",
		edits:    []func(*pipelinev1.Pipeline){router, func(p *pipelinev1.Pipeline) { p.Spec.Steps = p.Spec.Steps[:1] }},
		selected: metav1.LabelSelector{MatchLabels: stepPods},
		from:     routerPods,
		ports:    tcp(9080),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "vision")
			for _, edit := range tt.edits {
				edit(p)
			}
			np := testenv.Typed[networkingv1.NetworkPolicy](t, StepsNetworkPolicy(p))

			if np.Name != "facedetection-pipeline-steps" || np.Namespace != "vision" {
				t.Errorf("network policy is %s/%s", np.Namespace, np.Name)
			}
			if len(np.OwnerReferences) != 1 || !ptr.Deref(np.OwnerReferences[0].Controller, false) || np.OwnerReferences[0].UID != p.UID ||
				np.OwnerReferences[0].Kind != "Pipeline" {
				t.Errorf("owner references %+v do not make the Pipeline the controller", np.OwnerReferences)
			}
			wantLabels := map[string]string{
				"pipeline": "facedetection-pipeline", "app.kubernetes.io/name": "pipeline-network-policy",
				"app.kubernetes.io/instance": "facedetection-pipeline", "app.kubernetes.io/component": "network-policy",
				"app.kubernetes.io/part-of": "facedetection-pipeline", "app.kubernetes.io/managed-by": "pipeline-operator",
			}
			if diff := cmp.Diff(wantLabels, np.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			want := networkingv1.NetworkPolicySpec{
				PodSelector: tt.selected,
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: tt.from}}},
					Ports: tt.ports,
				}},
			}
			if diff := cmp.Diff(want, np.Spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoStepsNetworkPolicyForASingleStepChain(t *testing.T) {
	p := testenv.Sample(t, "vision")
	p.Spec.Steps = p.Spec.Steps[:1]
	if np := StepsNetworkPolicy(p); np != nil {
		t.Errorf("a single step is the entry, and needs no policy: got %+v", np)
	}
	p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain}
	if np := StepsNetworkPolicy(p); np != nil {
		t.Errorf("mode Chain, said: got %+v", np)
	}
}

// The policy's selectors are checked against the labels of the pods the builders make: which
// pods it isolates, which it admits, on which of their ports.
func TestStepsNetworkPolicySelectsThePodsOfTheBuilders(t *testing.T) {
	selector := func(t *testing.T, s *metav1.LabelSelector) labels.Selector {
		t.Helper()
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return sel
	}
	for _, mode := range []pipelinev1.DataPathMode{pipelinev1.DataPathModeChain, pipelinev1.DataPathModeRouter} {
		t.Run(string(mode), func(t *testing.T) {
			p := testenv.Sample(t, "vision")
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: mode}
			third := p.Spec.Steps[1]
			third.Name, third.Port = "step-3", ptr.To[int32](9090)
			p.Spec.Steps = append(p.Spec.Steps, third)
			// Another Pipeline of the namespace whose steps have the same names.
			other := p.DeepCopy()
			other.Name = "other"

			np := testenv.Typed[networkingv1.NetworkPolicy](t, StepsNetworkPolicy(p))
			isolated := selector(t, &np.Spec.PodSelector)
			admitted := selector(t, np.Spec.Ingress[0].From[0].PodSelector)
			ports := map[int32]bool{}
			for _, port := range np.Spec.Ingress[0].Ports {
				ports[port.Port.IntVal] = true
			}
			pod := func(d *appsv1.Deployment) labels.Set { return d.Spec.Template.Labels }

			for i := range p.Spec.Steps {
				d := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, i, "", "", ""))
				inner := i > 0 || mode == pipelinev1.DataPathModeRouter
				if got := isolated.Matches(pod(d)); got != inner {
					t.Errorf("step %d: isolated %t, want %t", i+1, got, inner)
				}
				if inner && !ports[d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort] {
					t.Errorf("step %d: its port %d is not admitted: %v", i+1, d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort, ports)
				}
				if got, want := admitted.Matches(pod(d)), mode == pipelinev1.DataPathModeChain; got != want {
					t.Errorf("step %d: admitted as a caller %t, want %t", i+1, got, want)
				}
				o := testenv.Typed[appsv1.Deployment](t, StepDeployment(other, i, "", "", ""))
				if isolated.Matches(pod(o)) || admitted.Matches(pod(o)) {
					t.Errorf("step %d of another Pipeline is selected", i+1)
				}
			}
			r := testenv.Typed[appsv1.Deployment](t, RouterDeployment(p, testenv.RouterImage, "{}", ""))
			if isolated.Matches(pod(r)) {
				t.Error("the router's pods are isolated: they are the entry")
			}
			if got, want := admitted.Matches(pod(r)), mode == pipelinev1.DataPathModeRouter; got != want {
				t.Errorf("the router's pods admitted %t, want %t", got, want)
			}
			if o := testenv.Typed[appsv1.Deployment](t, RouterDeployment(other, testenv.RouterImage, "{}", "")); admitted.Matches(pod(o)) {
				t.Error("the router of another Pipeline is admitted")
			}
		})
	}
}

func TestStepsNetworkPolicyName(t *testing.T) {
	a := func(n int) string { return strings.Repeat("a", n) }
	p := testenv.Sample(t, "vision")
	seen := map[string]string{}
	for _, tt := range []struct{ pipeline, want string }{
		{"a", "a-steps"},
		{"a-steps", "a-steps-steps"},
		{a(57), a(57) + "-steps"},
		// Cut to 54 characters and a hash of the whole name: a DNS label.
		{a(58), a(54) + "-"},
		{a(63), a(54) + "-"},
		{a(62) + "b", a(54) + "-"},
	} {
		p.Name = tt.pipeline
		got := StepsNetworkPolicyName(p)
		if len(got) > 63 || !strings.HasPrefix(got, tt.want) || (!strings.HasSuffix(tt.want, "-") && got != tt.want) {
			t.Errorf("Pipeline %s: policy %s, want %s…, at most 63 characters", tt.pipeline, got, tt.want)
		}
		if was, ok := seen[got]; ok {
			t.Errorf("Pipelines %s and %s share the policy name %s", was, tt.pipeline, got)
		}
		seen[got] = tt.pipeline
		if np := testenv.Typed[networkingv1.NetworkPolicy](t, StepsNetworkPolicy(p)); np.Name != got {
			t.Errorf("the policy is named %s, want %s", np.Name, got)
		}
	}
}
