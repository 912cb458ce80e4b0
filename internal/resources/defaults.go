package resources

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// The defaults live next to the API types (api/v1/defaults.go), shared with the defaulting
// webhook; these helpers read a Pipeline the way the operator acts on it, whether or not the
// webhook wrote the defaults into its spec.

// Values of spec.expose.ingress when it leaves them out (the CRD defaults them too).
const (
	defaultIngressPath     = "/"
	defaultIngressPathType = networkingv1.PathTypePrefix
)

// StorageType is the storage type of p: modelStorage.type.
func StorageType(p *pipelinev1.Pipeline) pipelinev1.ModelStorageType {
	return p.Spec.ModelStorage.Type
}

// OwnsStorage is true when the operator creates the claim (and for NFS, CSI and
// ModelStorageClass storage the volume).
func OwnsStorage(p *pipelinev1.Pipeline) bool {
	return StorageType(p) != pipelinev1.ModelStorageTypeExistingClaim
}

// OwnsVolume is true when the operator creates the PersistentVolume.
func OwnsVolume(p *pipelinev1.Pipeline) bool {
	t := StorageType(p)
	return t == pipelinev1.ModelStorageTypeNFS || t == pipelinev1.ModelStorageTypeCSI || t == pipelinev1.ModelStorageTypeModelStorageClass
}

// ModelStorageClassName is the name of the ModelStorageClass the storage of p is made from
// (modelStorage.modelStorageClass.name); empty unless the type is ModelStorageClass.
func ModelStorageClassName(p *pipelinev1.Pipeline) string {
	m := p.Spec.ModelStorage
	if StorageType(p) != pipelinev1.ModelStorageTypeModelStorageClass || m.ModelStorageClass == nil {
		return ""
	}
	return m.ModelStorageClass.Name
}

func capacity(p *pipelinev1.Pipeline) resource.Quantity {
	return p.Spec.ModelStorage.EffectiveCapacity()
}

func accessModes(p *pipelinev1.Pipeline) []corev1.PersistentVolumeAccessMode {
	return p.Spec.ModelStorage.EffectiveAccessModes()
}

func mountPath(p *pipelinev1.Pipeline) string {
	return p.Spec.ModelStorage.EffectiveMountPath()
}

// modelPath is where step i finds its model inside the container.
func modelPath(p *pipelinev1.Pipeline, i int) string {
	return path.Join(mountPath(p), p.Spec.Steps[i].Model)
}

// StepPort is the port step i listens on: port, else 80.
func StepPort(p *pipelinev1.Pipeline, i int) int32 {
	return p.Spec.Steps[i].EffectivePort()
}

// StepReplicas is the number of pods of step i: replicas, else 1.
func StepReplicas(p *pipelinev1.Pipeline, i int) int32 {
	return p.Spec.Steps[i].EffectiveReplicas()
}

// stepServiceType is the type of step i's Service: spec.expose.serviceType for the entry
// step, ClusterIP for every other step and whenever expose leaves it out.
// With dataPath.mode Router the router is the entry, and every step's Service is ClusterIP.
func stepServiceType(p *pipelinev1.Pipeline, i int) corev1.ServiceType {
	if i == 0 && !RouterEnabled(p) {
		return EntryServiceType(p)
	}
	return corev1.ServiceTypeClusterIP
}

// EntryServiceType is the type of the entry's Service: spec.expose.serviceType, else ClusterIP.
func EntryServiceType(p *pipelinev1.Pipeline) corev1.ServiceType {
	if p.Spec.Expose != nil && p.Spec.Expose.ServiceType != "" {
		return corev1.ServiceType(p.Spec.Expose.ServiceType)
	}
	return corev1.ServiceTypeClusterIP
}

// IngressSpec is the Ingress the spec asks for, nil when none.
func IngressSpec(p *pipelinev1.Pipeline) *pipelinev1.IngressExpose {
	if p.Spec.Expose == nil {
		return nil
	}
	return p.Spec.Expose.Ingress
}

// IngressPath is the path of the Ingress: spec.expose.ingress.path, else "/".
func IngressPath(p *pipelinev1.Pipeline) string {
	if ing := IngressSpec(p); ing != nil && ing.Path != "" {
		return ing.Path
	}
	return defaultIngressPath
}

// ingressPathType is how the Ingress path matches: spec.expose.ingress.pathType, else Prefix.
func ingressPathType(p *pipelinev1.Pipeline) networkingv1.PathType {
	if ing := IngressSpec(p); ing != nil && ing.PathType != "" {
		return networkingv1.PathType(ing.PathType)
	}
	return defaultIngressPathType
}
