// Package v1 contains the v1 API of the distri-infer.ndsl.cn group: the Pipeline and the
// ModelStorageClass, in the version the apiserver stores and the operator works in.
//
// v1 is the hub of the Pipeline's versions: v1beta1 converts to and from it
// (api/v1beta1/pipeline_conversion.go), and nothing but that conversion reads v1beta1.
// docs/migration.md maps every v1beta1 field to its v1 field. The ModelStorageClass has the
// same schema in both versions.
//
// The markers below drive controller-gen (deepcopy, CRD) and the client generators of
// hack/update-codegen.sh (pkg/client); the generators read them from this file.
//
// +kubebuilder:object:generate=true
// +groupName=distri-infer.ndsl.cn
// +groupGoName=DistriInfer
package v1
