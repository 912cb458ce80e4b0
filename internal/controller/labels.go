package controller

import (
	"strconv"

	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// Labels and annotations the operator puts on its children.
const (
	// LabelPipeline names the Pipeline a child belongs to.
	LabelPipeline = "pipeline"
	// LabelStep is the 1-based index of the step a child belongs to.
	LabelStep = "step"
	// LabelPipelineNamespace is the namespace of the Pipeline of a cluster-scoped child (the PV).
	LabelPipelineNamespace = "distri-infer.ndsl.cn/pipeline-namespace"

	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelComponent = "app.kubernetes.io/component"
	labelPartOf    = "app.kubernetes.io/part-of"
	labelManagedBy = "app.kubernetes.io/managed-by"

	// ManagedBy is the value of app.kubernetes.io/managed-by on every child.
	ManagedBy = "pipeline-operator"

	// annotationAppliedHash is the hash of the configuration last applied to a child; a
	// different hash means the spec changed, even where it only removed fields.
	annotationAppliedHash = "distri-infer.ndsl.cn/applied-hash"

	componentStorage = "model-storage"
	componentIngress = "ingress"
)

// commonLabels are the labels of every child of p.
func commonLabels(p *pipelinev1beta1.Pipeline, component string) map[string]string {
	return map[string]string{
		LabelPipeline:  p.Name,
		labelName:      "pipeline-step",
		labelInstance:  p.Name,
		labelComponent: component,
		labelPartOf:    p.Name,
		labelManagedBy: ManagedBy,
	}
}

// storageLabels are the labels of the PV and PVC of p.
func storageLabels(p *pipelinev1beta1.Pipeline) map[string]string {
	l := commonLabels(p, componentStorage)
	l[labelName] = "model-storage"
	l[LabelPipelineNamespace] = p.Namespace
	return l
}

// ingressLabels are the labels of the Ingress of p, which routes to the entry step.
func ingressLabels(p *pipelinev1beta1.Pipeline) map[string]string {
	l := commonLabels(p, componentIngress)
	l[labelName] = "pipeline-ingress"
	l[LabelStep] = "1"
	return l
}

// stepLabels are the labels of the Deployment, Service and pods of step i.
func stepLabels(p *pipelinev1beta1.Pipeline, i int) map[string]string {
	l := commonLabels(p, stepName(p, i))
	l[LabelStep] = strconv.Itoa(i + 1)
	return l
}

// stepSelector selects the pods of step i. It must not change while the step exists (a
// Deployment's selector is immutable), so it uses the step's name, not its position.
func stepSelector(p *pipelinev1beta1.Pipeline, i int) map[string]string {
	return map[string]string{
		LabelPipeline:  p.Name,
		labelComponent: stepName(p, i),
	}
}

// ownerReference makes p the controller of a namespaced child.
func ownerReference(p *pipelinev1beta1.Pipeline) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(pipelinev1beta1.GroupVersion.String()).
		WithKind("Pipeline").
		WithName(p.Name).
		WithUID(p.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}
