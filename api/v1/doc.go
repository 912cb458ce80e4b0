// Package v1 contains the v1 API of the distri-infer.ndsl.cn group: the Pipeline.
//
// v1 is the hub of the Pipeline's versions: v1beta1 converts to and from it
// (api/v1beta1/pipeline_conversion.go). It is defined but not served yet: make manifests
// leaves it out of the CustomResourceDefinition (CRD_PATHS) until the conversion webhook
// serves it. (controller-gen's skipversion marker cannot do this: it applies the markers of a
// type in no fixed order, and the printer columns and status subresource of a version it
// removed first fail the run.)
// docs/migration.md maps every v1beta1 field to its v1 field. The ModelStorageClass has no v1
// version; a v1 Pipeline refers to one by name.
//
// The markers below drive controller-gen (deepcopy, CRD) and the client generators of
// hack/update-codegen.sh (pkg/client); the generators read them from this file.
//
// +kubebuilder:object:generate=true
// +groupName=distri-infer.ndsl.cn
// +groupGoName=DistriInfer
package v1
