package resources

import (
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// LabelPodSecurityEnforce is the namespace label that sets the Pod Security Standards level
// the PodSecurity admission controller enforces on the namespace's pods.
const LabelPodSecurityEnforce = "pod-security.kubernetes.io/enforce"

// PodSecurityLevel is a Pod Security Standards level: privileged, baseline or restricted.
type PodSecurityLevel string

// PodSecurityRestricted is the level that requires pods to run as non-root with every
// capability dropped. The operator's step pods meet the other levels as they are.
const PodSecurityRestricted PodSecurityLevel = "restricted"

// podEnablesServiceLinks is enableServiceLinks of every pod the operator builds: false. The
// kubelet otherwise gives each container variables for every Service of the namespace
// (<NAME>_SERVICE_HOST, <NAME>_PORT, ...): they name Services the pod has no business with,
// grow with their number, and let whoever may create a Service in the namespace set variables
// in the step's container over those its image sets. Steps reach each other by DNS
// (NEXT_STEP_URL, the router's configuration), and the Kubernetes API's KUBERNETES_SERVICE_HOST
// and KUBERNETES_SERVICE_PORT are still set.
const podEnablesServiceLinks = false

// NamespacePodSecurity is the level a namespace with these labels enforces; empty when the
// namespace sets none (the cluster's default applies).
func NamespacePodSecurity(labels map[string]string) PodSecurityLevel {
	return PodSecurityLevel(labels[LabelPodSecurityEnforce])
}

// StepPodSecurityContext is the security context of every step pod: the container runtime's
// default seccomp profile, which the restricted level requires and every image tolerates.
func StepPodSecurityContext() *corev1ac.PodSecurityContextApplyConfiguration {
	return corev1ac.PodSecurityContext().
		WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))
}

// StepSecurityContext is the security context of a step's container: the step's own when it
// sets one, else no privilege escalation, and in a namespace that enforces the restricted
// level also a non-root user and no capabilities. Outside that level images that run as root
// (nginx) keep working.
func StepSecurityContext(s pipelinev1.Step, level PodSecurityLevel) *corev1ac.SecurityContextApplyConfiguration {
	if s.SecurityContext != nil {
		return Convert[corev1ac.SecurityContextApplyConfiguration](*s.SecurityContext)
	}
	sc := corev1ac.SecurityContext().WithAllowPrivilegeEscalation(false)
	if level == PodSecurityRestricted {
		sc.WithRunAsNonRoot(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop(corev1.Capability("ALL")))
	}
	return sc
}
