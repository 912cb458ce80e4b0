package manager

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	pipelineadmission "github.com/ndsl-cn/pipeline-operator/internal/admission"
)

// The registration of the deprecated API version, v1beta1: the only file of the operator that
// imports it. Retiring v1beta1 is deleting api/v1beta1 and this file's contents (the scheme's
// types and conversion, the storage identity recorded from its form, the spelling of its fields
// in the webhooks' messages); docs/architecture_test.go builds the operator that way.

// addV1beta1 adds v1beta1's types, and their conversion to v1, to s.
func addV1beta1(s *runtime.Scheme) { utilruntime.Must(pipelinev1beta1.AddToScheme(s)) }

// recordStorageIdentity records on a Pipeline the storage identity its v1beta1 form gave it.
var recordStorageIdentity = pipelinev1beta1.RecordStorageIdentity

// spellings name the fields of the admission webhooks' refusals and warnings for requests made
// in v1beta1, the version the operator converts.
var spellings = map[string]pipelineadmission.Spelling{pipelinev1beta1.GroupVersion.Version: pipelinev1beta1.FieldSpelling{}}
