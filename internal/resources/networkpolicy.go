package resources

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// The labels of the steps' NetworkPolicy.
const (
	componentNetworkPolicy = "network-policy"
	networkPolicyLabelName = "pipeline-network-policy"
)

// StepsNetworkPolicyName names the NetworkPolicy of a Pipeline's inner steps: <pipeline>-steps.
// Its name follows from the Pipeline's alone, so it stays when steps are renamed or reordered.
func StepsNetworkPolicyName(p *pipelinev1.Pipeline) string {
	return childName(p.Name, "steps")
}

// networkPolicyLabels are the labels of the steps' NetworkPolicy.
func networkPolicyLabels(p *pipelinev1.Pipeline) map[string]string {
	l := commonLabels(p, componentNetworkPolicy)
	l[LabelName] = networkPolicyLabelName
	return l
}

// stepPods selects the pods of every step of p (and no router's pod: its
// app.kubernetes.io/name is another).
func stepPods(p *pipelinev1.Pipeline) map[string]string {
	return map[string]string{
		LabelPipeline:  p.Name,
		LabelName:      stepLabelName,
		LabelManagedBy: ManagedBy,
	}
}

// innerSteps are the indexes of the steps of p that its entry calls, not its callers: every step
// after the first in dataPath.mode Chain (the first is the entry), every step with the router
// (the router is the entry).
func innerSteps(p *pipelinev1.Pipeline) []int {
	first := 1
	if RouterEnabled(p) {
		first = 0
	}
	var out []int
	for i := first; i < len(p.Spec.Steps); i++ {
		out = append(out, i)
	}
	return out
}

// StepsNetworkPolicy is the NetworkPolicy that lets only the Pipeline's own callers reach its
// inner steps (innerSteps): it selects their pods and admits, on the TCP ports they listen on,
// only pods of the Pipeline's namespace that call steps — the router's with dataPath.mode Router,
// the Pipeline's step pods in mode Chain (each step calls the next at NEXT_STEP_URL). The entry
// is not selected and stays open to whoever reaches its Service (clients, node ports, load
// balancers, ingress controllers); the kubelet's probes come from the node, which a
// NetworkPolicy always admits. nil for a Pipeline without inner steps: one step in mode Chain.
func StepsNetworkPolicy(p *pipelinev1.Pipeline) *networkingv1ac.NetworkPolicyApplyConfiguration {
	inner := innerSteps(p)
	if len(inner) == 0 {
		return nil
	}

	selected := metav1ac.LabelSelector().WithMatchLabels(stepPods(p))
	callers := RouterSelector(p)
	if !RouterEnabled(p) {
		callers = stepPods(p)
		// The entry's pods carry the label step "1", whichever step is first (StepLabels).
		selected.WithMatchExpressions(metav1ac.LabelSelectorRequirement().
			WithKey(LabelStep).
			WithOperator(metav1.LabelSelectorOpNotIn).
			WithValues("1"))
	}

	ports := make([]int32, 0, len(inner))
	for _, i := range inner {
		ports = append(ports, StepPort(p, i))
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	rule := networkingv1ac.NetworkPolicyIngressRule().
		WithFrom(networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(callers)))
	for _, port := range ports {
		rule.WithPorts(networkingv1ac.NetworkPolicyPort().
			WithProtocol(corev1.ProtocolTCP).
			WithPort(intstr.FromInt32(port)))
	}

	return networkingv1ac.NetworkPolicy(StepsNetworkPolicyName(p), p.Namespace).
		WithLabels(networkPolicyLabels(p)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(networkingv1ac.NetworkPolicySpec().
			WithPodSelector(selected).
			WithPolicyTypes(networkingv1.PolicyTypeIngress).
			WithIngress(rule))
}
