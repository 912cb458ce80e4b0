package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// nameAffinity is the affinity of a pod pinned to the node named node.
func nameAffinity(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
}

func TestPinningAffinity(t *testing.T) {
	tests := []struct {
		name     string
		location string
		// routerLocation is dataPath.router.location; dataPath.mode is Router.
		routerLocation string
		node           string
		nodeSelector   map[string]string
		want           *corev1.Affinity
	}{
		{name: "the location itself when no node is resolved", location: "edge-a", want: nameAffinity("edge-a")},
		{name: "the node the location resolves to", location: "host-a", node: "node-7", want: nameAffinity("node-7")},
		{name: "the fallback node", location: "edge-a", node: "edge-b", want: nameAffinity("edge-b")},
		{name: "the step's own node selector stays beside the affinity", location: "edge-a", node: "edge-a",
			nodeSelector: map[string]string{"accelerator": "npu"}, want: nameAffinity("edge-a")},
		{name: "no location: the scheduler chooses", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "default")
			p.Spec.Steps[0].Location = tt.location
			p.Spec.Steps[0].NodeSelector = tt.nodeSelector
			pod := testenv.Typed[appsv1.Deployment](t, StepDeployment(p, 0, "", tt.node, "")).Spec.Template.Spec
			if diff := cmp.Diff(tt.want, pod.Affinity); diff != "" {
				t.Errorf("step affinity (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.nodeSelector, pod.NodeSelector); diff != "" {
				t.Errorf("step node selector (-want +got):\n%s", diff)
			}
			if _, ok := pod.NodeSelector[corev1.LabelHostname]; ok {
				t.Errorf("the step is pinned by the label %s, which a kubelet can set", corev1.LabelHostname)
			}

			p = testenv.RoutedSample(t)
			p.Spec.DataPath.Router.Location = tt.location
			pod = testenv.Typed[appsv1.Deployment](t, RouterDeployment(p, testenv.RouterImage, "{}", tt.node)).Spec.Template.Spec
			if diff := cmp.Diff(tt.want, pod.Affinity); diff != "" {
				t.Errorf("router affinity (-want +got):\n%s", diff)
			}
			if len(pod.NodeSelector) != 0 {
				t.Errorf("router node selector %v", pod.NodeSelector)
			}
		})
	}
}

func TestPinnedNode(t *testing.T) {
	tests := []struct {
		name string
		pod  corev1.PodSpec
		want string
	}{
		{"pinned by name", corev1.PodSpec{Affinity: nameAffinity("node-7")}, "node-7"},
		{"pinned by name, an earlier hostname selector ignored",
			corev1.PodSpec{Affinity: nameAffinity("node-7"), NodeSelector: map[string]string{corev1.LabelHostname: "host-a"}}, "node-7"},
		{"pinned by an earlier version, on the hostname label", corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: "host-a"}}, "host-a"},
		{"an affinity on a label is not a pin", corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}}},
			}}}}}}, ""},
		{"pinned to no node", corev1.PodSpec{NodeSelector: map[string]string{"accelerator": "npu"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PinnedNode(&tt.pod); got != tt.want {
				t.Errorf("PinnedNode = %q, want %q", got, tt.want)
			}
		})
	}
}
