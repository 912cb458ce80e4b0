package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "distri-infer.ndsl.cn", Version: "v1"}

	// SchemeBuilder collects the functions that add this group-version to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	// SchemeGroupVersion is GroupVersion under the name the generated clientset,
	// listers and informers (pkg/client) refer to.
	SchemeGroupVersion = GroupVersion
)

// Resource returns the group-qualified resource of this group-version, e.g. for
// apierrors.NewNotFound(Resource("pipelines"), name).
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Pipeline{}, &PipelineList{}, &ModelStorageClass{}, &ModelStorageClassList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
