package nodes

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func node(mutate ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Labels: map[string]string{corev1.LabelHostname: "edge-1"},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastTransitionTime: metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)),
				LastHeartbeatTime:  metav1.NewTime(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))},
		}},
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func setReady(status corev1.ConditionStatus, reason string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Status.Conditions[1].Status, n.Status.Conditions[1].Reason = status, reason }
}

func taint(key string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: "x", Effect: effect})
	}
}

// taintAt adds a NoExecute taint added at added.
func taintAt(key string, added time.Time) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.NewTime(added))})
	}
}

func TestClassify(t *testing.T) {
	readySince := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	taintAdded := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	tests := []struct {
		name        string
		node        *corev1.Node
		tolerations []corev1.Toleration
		state       State
		since       time.Time
		detail      string
	}{
		{"missing", nil, nil, StateMissing, time.Time{}, "does not exist"},
		{"ready", node(), nil, StateReady, readySince, ""},
		{"not ready", node(setReady(corev1.ConditionFalse, "KubeletNotReady")), nil, StateNotReady, readySince,
			"is not ready (Ready False since 2026-02-01T00:00:00Z: KubeletNotReady)"},
		{"unknown", node(setReady(corev1.ConditionUnknown, "NodeStatusUnknown")), nil, StateNotReady, readySince,
			"is not ready (Ready Unknown since 2026-02-01T00:00:00Z: NodeStatusUnknown)"},
		{"never reported", node(func(n *corev1.Node) { n.Status.Conditions = nil }), nil, StateNotReady,
			time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), "has not reported Ready yet"},
		{"cordoned", node(func(n *corev1.Node) { n.Spec.Unschedulable = true }), nil, StateUnschedulable, readySince,
			"is ready but cordoned"},
		{"a NoExecute taint evicts: not ready since it was added", node(taintAt("maintenance", taintAdded)), nil, StateNotReady, taintAdded,
			"is ready but tainted maintenance:NoExecute since 2026-02-03T04:05:06Z: the step's pods are evicted"},
		{"a NoExecute taint without timeAdded counts from the Ready transition", node(taint("maintenance", corev1.TaintEffectNoExecute)), nil,
			StateNotReady, readySince, "is ready but tainted maintenance:NoExecute since 2026-02-01T00:00:00Z: the step's pods are evicted"},
		{"the first NoExecute taint added is the clock", node(taintAt("late", taintAdded.Add(time.Hour)), taintAt("early", taintAdded)), nil,
			StateNotReady, taintAdded, "is ready but tainted early:NoExecute since 2026-02-03T04:05:06Z: the step's pods are evicted"},
		{"a tolerated NoExecute taint is no obstacle", node(taintAt("maintenance", taintAdded)),
			[]corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}, StateReady, readySince, ""},
		{"NoSchedule taint", node(taint("gpu", corev1.TaintEffectNoSchedule)), nil, StateUnschedulable, readySince,
			"is ready but tainted gpu:NoSchedule"},
		{"PreferNoSchedule taint is no obstacle", node(taint("gpu", corev1.TaintEffectPreferNoSchedule)), nil, StateReady, readySince, ""},
		{"a tolerated taint is no obstacle", node(taint("gpu", corev1.TaintEffectNoSchedule)),
			[]corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}, StateReady, readySince, ""},
		{"a toleration with another value does not tolerate", node(taint("gpu", corev1.TaintEffectNoSchedule)),
			[]corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "y"}}, StateUnschedulable, readySince,
			"is ready but tainted gpu:NoSchedule"},
		{"a toleration of everything", node(taint("gpu", corev1.TaintEffectNoExecute)),
			[]corev1.Toleration{{Operator: corev1.TolerationOpExists}}, StateReady, readySince, ""},
		{"the lifecycle controller's taints are left to the Ready condition",
			node(taint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute), taint(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)),
			nil, StateReady, readySince, ""},
		{"cordoned and tainted", node(func(n *corev1.Node) { n.Spec.Unschedulable = true }, taint("m", corev1.TaintEffectNoSchedule)), nil,
			StateUnschedulable, readySince, "is ready but cordoned, tainted m:NoSchedule"},
		{"cordoned and tainted NoExecute is not ready", node(func(n *corev1.Node) { n.Spec.Unschedulable = true }, taintAt("m", taintAdded)), nil,
			StateNotReady, taintAdded, "is ready but tainted m:NoExecute since 2026-02-03T04:05:06Z: the step's pods are evicted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := Classify(tc.node, tc.tolerations)
			if h.State != tc.state || !h.Since.Equal(tc.since) || h.Detail != tc.detail {
				t.Errorf("Classify() = %+v, want state %s since %s detail %q", h, tc.state, tc.since, tc.detail)
			}
		})
	}
}

func TestStripForPlacementKeepsOnlyWhatPlacementReads(t *testing.T) {
	n := node(taint("m", corev1.TaintEffectNoExecute), taint("p", corev1.TaintEffectPreferNoSchedule), func(n *corev1.Node) {
		n.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
		n.Spec.Unschedulable = true
		n.Spec.PodCIDR = "10.0.0.0/24"
		n.Status.Images = []corev1.ContainerImage{{Names: []string{"nginx"}}}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
		n.Status.NodeInfo.KubeletVersion = "v1.37.2"
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
		n.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: {}}
	})
	out, err := StripForPlacement(n)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Node)
	if got.Annotations != nil || got.Spec.PodCIDR != "" || got.Status.Images != nil || got.Status.Addresses != nil ||
		got.Status.NodeInfo.KubeletVersion != "" || got.Status.DaemonEndpoints.KubeletEndpoint.Port != 0 || got.Status.Capacity != nil {
		t.Errorf("fields placement does not read were kept: %+v", got)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != corev1.NodeReady || !got.Status.Conditions[0].LastHeartbeatTime.IsZero() {
		t.Errorf("conditions %+v, want the Ready condition alone without its heartbeat", got.Status.Conditions)
	}
	if Classify(got, nil) != Classify(n, nil) {
		t.Errorf("the stripped node classifies as %+v, the full one as %+v", Classify(got, nil), Classify(n, nil))
	}
	if len(got.Spec.Taints) != 1 || got.Labels[corev1.LabelHostname] != "edge-1" || !got.Spec.Unschedulable || got.CreationTimestamp.IsZero() {
		t.Errorf("placement fields lost: %+v", got)
	}
}

func TestPlacementDiffers(t *testing.T) {
	base := node()
	tests := []struct {
		name   string
		mutate func(*corev1.Node)
		want   bool
	}{
		{"heartbeat", func(n *corev1.Node) { n.Status.Conditions[1].LastHeartbeatTime = metav1.Now() }, false},
		{"another condition", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionTrue }, false},
		{"images and addresses", func(n *corev1.Node) {
			n.Status.Images = []corev1.ContainerImage{{Names: []string{"x"}}}
			n.Status.Addresses = []corev1.NodeAddress{{Address: "10.0.0.2"}}
		}, false},
		{"an annotation", func(n *corev1.Node) { n.Annotations = map[string]string{"a": "b"} }, false},
		{"a PreferNoSchedule taint", taint("p", corev1.TaintEffectPreferNoSchedule), false},
		{"Ready status", setReady(corev1.ConditionUnknown, "KubeletReady"), true},
		{"Ready reason", setReady(corev1.ConditionTrue, "Other"), true},
		{"Ready transition time", func(n *corev1.Node) { n.Status.Conditions[1].LastTransitionTime = metav1.Now() }, true},
		{"Ready condition gone", func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[:1] }, true},
		{"cordon", func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
		{"a NoExecute taint", taint("m", corev1.TaintEffectNoExecute), true},
		{"hostname label", func(n *corev1.Node) { n.Labels = map[string]string{corev1.LabelHostname: "other"} }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			changed := base.DeepCopy()
			tc.mutate(changed)
			if got := PlacementDiffers(base, changed); got != tc.want {
				t.Errorf("PlacementDiffers() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlacementDiffersOnTheTimeATaintWasAdded(t *testing.T) {
	first := node(taintAt("m", time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC)))
	again := node(taintAt("m", time.Date(2026, 2, 3, 0, 5, 0, 0, time.UTC)))
	if !PlacementDiffers(first, again) {
		t.Error("a NoExecute taint added again, at another time, makes no difference")
	}
	if PlacementDiffers(first, first.DeepCopy()) {
		t.Error("the same taint makes a difference")
	}
}
