package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=distri-infer.ndsl.cn,resources=modelstorageclasses,verbs=get

// modelStorageClassAccess accepts storage of type ModelStorageClass only when the class exists
// and its namespaceSelector selects the Pipeline's namespace: a cluster administrator published
// the class to that namespace, so its author needs no right on PersistentVolumes. validate calls
// it on create and whenever the storage changes, like storageAccess; a namespace that a class
// stops selecting later keeps its Pipelines (the operator then makes no new volume and says so).
// Its refusals name the class's field as n spells it.
func (v *Validator) modelStorageClassAccess(ctx context.Context, p *pipelinev1.Pipeline, n fieldNames) error {
	m := &p.Spec.ModelStorage
	if v.Classes == nil || m.Type != pipelinev1.ModelStorageTypeModelStorageClass || m.ModelStorageClass == nil {
		return nil
	}
	name := m.ModelStorageClass.Name
	namePath := n.field(field.NewPath("spec", "modelStorage", "modelStorageClass", "name"))
	class := &pipelinev1.ModelStorageClass{}
	err := v.Classes.Get(ctx, client.ObjectKey{Name: name}, class)
	switch {
	case apierrors.IsNotFound(err):
		return apierrors.NewInvalid(pipelinev1.GroupVersion.WithKind("Pipeline").GroupKind(), p.Name, field.ErrorList{
			field.Invalid(namePath, name, fmt.Sprintf("ModelStorageClass %s does not exist: ask a cluster administrator to create it "+
				"with a namespaceSelector that selects namespace %s, or name a class that exists", name, p.Namespace))})
	case err != nil:
		return apierrors.NewServiceUnavailable(fmt.Sprintf("cannot read ModelStorageClass %s: %v; try again", name, err))
	}
	ns := &corev1.Namespace{}
	if err := v.Classes.Get(ctx, client.ObjectKey{Name: p.Namespace}, ns); err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("cannot read the labels of namespace %s, which ModelStorageClass %s selects by: %v; try again",
			p.Namespace, name, err))
	}
	selected, err := class.Selects(ns.Labels)
	if selected {
		return nil
	}
	why := "its namespaceSelector does not select the namespace's labels"
	if err != nil {
		why = err.Error()
	}
	return apierrors.NewForbidden(pipelinev1.Resource("pipelines"), p.Name, field.Forbidden(namePath, fmt.Sprintf(
		"ModelStorageClass %s is not published to namespace %s (%s): ask a cluster administrator to add namespace %s "+
			"to the namespaceSelector of ModelStorageClass %s", name, p.Namespace, why, p.Namespace, name)))
}
