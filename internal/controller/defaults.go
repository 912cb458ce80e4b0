package controller

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// The defaults live next to the API types (api/v1beta1/defaults.go), shared with the defaulting
// webhook; these helpers read a Pipeline the way the operator acts on it, whether or not the
// webhook wrote the defaults into its spec.

// Values of spec.expose.ingress when it leaves them out (the CRD defaults them too).
const (
	defaultIngressPath     = "/"
	defaultIngressPathType = networkingv1.PathTypePrefix
)

func storageType(p *pipelinev1beta1.Pipeline) pipelinev1beta1.StorageType {
	return p.Spec.ModelStorage.EffectiveType()
}

// ownsStorage is true when the operator creates the claim (and for nfs/csi the volume).
func ownsStorage(p *pipelinev1beta1.Pipeline) bool {
	return storageType(p) != pipelinev1beta1.StorageTypeExistingClaim
}

// ownsVolume is true when the operator creates the PersistentVolume.
func ownsVolume(p *pipelinev1beta1.Pipeline) bool {
	t := storageType(p)
	return t == pipelinev1beta1.StorageTypeNFS || t == pipelinev1beta1.StorageTypeCSI
}

func capacity(p *pipelinev1beta1.Pipeline) resource.Quantity {
	return p.Spec.ModelStorage.EffectiveCapacity()
}

func accessModes(p *pipelinev1beta1.Pipeline) []corev1.PersistentVolumeAccessMode {
	return p.Spec.ModelStorage.EffectiveAccessModes()
}

func mountPath(p *pipelinev1beta1.Pipeline) string {
	return p.Spec.ModelStorage.EffectiveMountPath()
}

// modelPath is where step i finds its model inside the container.
func modelPath(p *pipelinev1beta1.Pipeline, i int) string {
	return path.Join(mountPath(p), p.Spec.Steps[i].Model)
}

// stepPort is the port step i listens on: port, else args.listenPort, else 80.
func stepPort(p *pipelinev1beta1.Pipeline, i int) int32 {
	return p.Spec.Steps[i].EffectivePort()
}

func stepReplicas(p *pipelinev1beta1.Pipeline, i int) int32 {
	return p.Spec.Steps[i].EffectiveReplicas()
}

// stepServiceType is the type of step i's Service: spec.expose.serviceType for the entry
// step, ClusterIP for every other step and whenever expose leaves it out.
// With the router enabled the router is the entry, and every step's Service is ClusterIP.
func stepServiceType(p *pipelinev1beta1.Pipeline, i int) corev1.ServiceType {
	if i == 0 && !routerEnabled(p) {
		return entryServiceType(p)
	}
	return corev1.ServiceTypeClusterIP
}

// entryServiceType is the type of the entry's Service: spec.expose.serviceType, else ClusterIP.
func entryServiceType(p *pipelinev1beta1.Pipeline) corev1.ServiceType {
	if p.Spec.Expose != nil && p.Spec.Expose.ServiceType != "" {
		return corev1.ServiceType(p.Spec.Expose.ServiceType)
	}
	return corev1.ServiceTypeClusterIP
}

// ingressSpec is the Ingress the spec asks for, nil when none.
func ingressSpec(p *pipelinev1beta1.Pipeline) *pipelinev1beta1.IngressExpose {
	if p.Spec.Expose == nil {
		return nil
	}
	return p.Spec.Expose.Ingress
}

// ingressPath is the path of the Ingress: spec.expose.ingress.path, else "/".
func ingressPath(p *pipelinev1beta1.Pipeline) string {
	if ing := ingressSpec(p); ing != nil && ing.Path != "" {
		return ing.Path
	}
	return defaultIngressPath
}

// ingressPathType is how the Ingress path matches: spec.expose.ingress.pathType, else Prefix.
func ingressPathType(p *pipelinev1beta1.Pipeline) networkingv1.PathType {
	if ing := ingressSpec(p); ing != nil && ing.PathType != "" {
		return networkingv1.PathType(ing.PathType)
	}
	return defaultIngressPathType
}
