package controller

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// The defaults live next to the API types (api/v1beta1/defaults.go), shared with the defaulting
// webhook; these helpers read a Pipeline the way the operator acts on it, whether or not the
// webhook wrote the defaults into its spec.

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
