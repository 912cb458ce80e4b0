package resources

import (
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// Labels the operator puts on its children.
const (
	// LabelPipeline names the Pipeline a child belongs to.
	LabelPipeline = "pipeline"
	// LabelStep is the 1-based index of the step a child belongs to.
	LabelStep = "step"
	// LabelPipelineNamespace is the namespace of the Pipeline of a cluster-scoped child (the PV).
	LabelPipelineNamespace = "distri-infer.ndsl.cn/pipeline-namespace"

	LabelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	labelPartOf    = "app.kubernetes.io/part-of"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// ManagedBy is the value of app.kubernetes.io/managed-by on every child.
	ManagedBy = "pipeline-operator"

	componentStorage = "model-storage"
	componentIngress = "ingress"

	// stepLabelName is the app.kubernetes.io/name of the children of steps and of their pods.
	stepLabelName = "pipeline-step"
)

// operatorLabels are the keys of every label the operator puts on its children and their pods.
var operatorLabels = []string{LabelPipeline, LabelStep, LabelPipelineNamespace, LabelName, labelInstance,
	LabelComponent, labelPartOf, LabelManagedBy}

// IsOperatorLabel reports whether key is the key of a label the operator puts on its children
// or their pods: the cache keeps no other label of a child (but, on a step's pod template, those
// of the step's podMetadata).
func IsOperatorLabel(key string) bool {
	return slices.Contains(operatorLabels, key)
}

// ReservedKeyPrefix is the prefix of the label and annotation keys the operator keeps for
// itself: a step's podMetadata may not use it.
const ReservedKeyPrefix = "distri-infer.ndsl.cn/"

// IsReservedLabel reports whether a step's podMetadata may not set the label key: one of the
// operator's labels, which select and name the step's pods, or a key under ReservedKeyPrefix.
func IsReservedLabel(key string) bool {
	return IsOperatorLabel(key) || strings.HasPrefix(key, ReservedKeyPrefix)
}

// IsReservedAnnotation reports whether a step's podMetadata may not set the annotation key: a
// key under ReservedKeyPrefix.
func IsReservedAnnotation(key string) bool {
	return strings.HasPrefix(key, ReservedKeyPrefix)
}

// commonLabels are the labels of every child of p.
func commonLabels(p *pipelinev1.Pipeline, component string) map[string]string {
	return map[string]string{
		LabelPipeline:  p.Name,
		LabelName:      stepLabelName,
		labelInstance:  p.Name,
		LabelComponent: component,
		labelPartOf:    p.Name,
		LabelManagedBy: ManagedBy,
	}
}

// storageLabels are the labels of the PV and PVC of p.
func storageLabels(p *pipelinev1.Pipeline) map[string]string {
	l := commonLabels(p, componentStorage)
	l[LabelName] = "model-storage"
	l[LabelPipelineNamespace] = p.Namespace
	return l
}

// ingressLabels are the labels of the Ingress of p, which routes to the entry step.
func ingressLabels(p *pipelinev1.Pipeline) map[string]string {
	l := commonLabels(p, componentIngress)
	l[LabelName] = "pipeline-ingress"
	l[LabelStep] = "1"
	return l
}

// StepLabels are the labels of the Deployment, Service and pods of step i.
func StepLabels(p *pipelinev1.Pipeline, i int) map[string]string {
	l := commonLabels(p, StepName(p, i))
	l[LabelStep] = strconv.Itoa(i + 1)
	return l
}

// StepSelector selects the pods of step i. It must not change while the step exists (a
// Deployment's selector is immutable), so it uses the step's name, not its position.
func StepSelector(p *pipelinev1.Pipeline, i int) map[string]string {
	return map[string]string{
		LabelPipeline:  p.Name,
		LabelComponent: StepName(p, i),
	}
}

// ownerReference makes p the controller of a namespaced child.
func ownerReference(p *pipelinev1.Pipeline) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(pipelinev1.GroupVersion.String()).
		WithKind("Pipeline").
		WithName(p.Name).
		WithUID(p.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// OwnedBy reports whether obj is a child of p: controlled by it, or for the cluster-scoped PV,
// labelled with its namespace and name.
func OwnedBy(p *pipelinev1.Pipeline, obj client.Object) bool {
	if obj.GetNamespace() == "" {
		l := obj.GetLabels()
		return l[LabelPipeline] == p.Name && l[LabelPipelineNamespace] == p.Namespace
	}
	return metav1.IsControlledBy(obj, p)
}
