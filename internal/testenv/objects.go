package testenv

import (
	"encoding/json"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

// Fataler is what the helpers need of a testing.T or a GinkgoT.
type Fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Sample is the sample Pipeline in namespace ns, with a UID as the apiserver would give it.
func Sample(t Fataler, ns string) *pipelinev1.Pipeline {
	t.Helper()
	p, err := samples.Pipeline(ns)
	if err != nil {
		t.Fatalf("decode sample: %v", err)
	}
	p.UID = types.UID("uid-" + p.Name)
	return p
}

// Typed converts an apply configuration to the API object of the same shape.
func Typed[T any](t Fataler, ac any) *T {
	t.Helper()
	data, err := json.Marshal(ac)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

// RoutedSample is the sample Pipeline with the router enabled on its first step's node, and its
// first step given a timeout, retries and a stopWhen.
func RoutedSample(t Fataler) *pipelinev1.Pipeline {
	p := Sample(t, "vision")
	p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter, Router: &pipelinev1.Router{Location: "xx-test-node236"}}
	p.Spec.Steps[0].TimeoutSeconds = ptr.To[int32](5)
	p.Spec.Steps[0].Retries = ptr.To[int32](2)
	p.Spec.Steps[0].StopWhen = "response.faces == 0"
	return p
}

// RouterImage is the router image the suites give the reconciler.
const RouterImage = "ghcr.io/ndsl-cn/pipeline-operator:v0.2.0"

// EnvMap is env as a map from name to value.
func EnvMap(env []corev1.EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
}

// Utilization is the autoscaling target of average utilization of r, in percent.
func Utilization(r corev1.ResourceName, percent int32) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: r, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(percent)}}}
}
