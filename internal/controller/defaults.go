package controller

import (
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// Values used where the spec leaves a field out.
const (
	defaultMountPath = "/models"
	defaultPort      = int32(80)
	defaultReplicas  = int32(1)

	defaultIngressPath     = "/"
	defaultIngressPathType = networkingv1.PathTypePrefix
)

var (
	defaultCapacity    = resource.MustParse("1Gi")
	defaultAccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}
)

func storageType(p *pipelinev1beta1.Pipeline) pipelinev1beta1.StorageType {
	if t := p.Spec.ModelStorage.Type; t != "" {
		return t
	}
	return pipelinev1beta1.StorageTypeNFS
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
	if c := p.Spec.ModelStorage.Capacity; c != nil {
		return *c
	}
	return defaultCapacity
}

func accessModes(p *pipelinev1beta1.Pipeline) []corev1.PersistentVolumeAccessMode {
	if m := p.Spec.ModelStorage.AccessModes; len(m) > 0 {
		return m
	}
	return defaultAccessModes
}

func mountPath(p *pipelinev1beta1.Pipeline) string {
	if m := p.Spec.ModelStorage.MountPath; m != "" {
		return m
	}
	return defaultMountPath
}

// modelPath is where step i finds its model inside the container.
func modelPath(p *pipelinev1beta1.Pipeline, i int) string {
	return path.Join(mountPath(p), p.Spec.Steps[i].Model)
}

// stepPort is the port step i listens on: port, else args.listenPort, else 80.
func stepPort(p *pipelinev1beta1.Pipeline, i int) int32 {
	s := p.Spec.Steps[i]
	if s.Port != nil {
		return *s.Port
	}
	if v, ok := s.Args[pipelinev1beta1.ListenPortArg]; ok {
		if n, err := strconv.ParseInt(string(v), 10, 32); err == nil && n > 0 && n <= 65535 {
			return int32(n)
		}
	}
	return defaultPort
}

func stepReplicas(p *pipelinev1beta1.Pipeline, i int) int32 {
	if r := p.Spec.Steps[i].Replicas; r != nil {
		return *r
	}
	return defaultReplicas
}

// stepServiceType is the type of step i's Service: spec.expose.serviceType for the entry
// step, ClusterIP for every other step and whenever expose leaves it out.
func stepServiceType(p *pipelinev1beta1.Pipeline, i int) corev1.ServiceType {
	if i == 0 && p.Spec.Expose != nil && p.Spec.Expose.ServiceType != "" {
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
