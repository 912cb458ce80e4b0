// Package v1beta1 contains the API types of the distri-infer.ndsl.cn/v1beta1 group.
//
// The markers below drive controller-gen (deepcopy, CRD) and the client generators of
// hack/update-codegen.sh (pkg/client); the generators read them from this file.
//
// +kubebuilder:object:generate=true
// +groupName=distri-infer.ndsl.cn
// +groupGoName=DistriInfer
package v1beta1
