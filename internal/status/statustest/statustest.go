// Package statustest builds the children a healthy Pipeline has, as a pass observes them, for
// tests of the status and of what reads it.
package statustest

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// AvailableDeployment is a Deployment of replicas pods, all updated and available.
func AvailableDeployment(replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d", Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: replicas, UpdatedReplicas: replicas,
			ReadyReplicas: replicas, AvailableReplicas: replicas},
	}
}

// ReadyService is a Service with a cluster IP.
func ReadyService() *corev1.Service {
	return &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.10"}}
}

// BoundPV is a bound PersistentVolume.
func BoundPV() *corev1.PersistentVolume {
	return &corev1.PersistentVolume{Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
}

// BoundPVC is a bound PersistentVolumeClaim.
func BoundPVC() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
}
