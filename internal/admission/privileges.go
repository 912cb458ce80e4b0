package admission

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// baselineSELinuxTypes are the SELinux types the Pod Security baseline level lets a pod take
// (besides none).
var baselineSELinuxTypes = []string{"container_t", "container_init_t", "container_kvm_t", "container_engine_t"}

// controlPlaneTaints are the keys of the taints that keep workloads off the control plane's
// nodes.
var controlPlaneTaints = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// validateStepPrivileges refuses what the operator's own identity may not create
// (config/policy/guard.yaml): a privileged container, an added capability, what the Pod
// Security baseline level refuses (an Unconfined seccomp or AppArmor profile, an SELinux type
// other than the container ones or an SELinux user or role, an unmasked /proc), a container that
// asks for root or for privilege escalation, a toleration of the control plane's taints, a probe
// that names a host. Refused here, the author reads why in the step's fields; left to the
// policy, the Pipeline would stop at ApplyRefused.
func validateStepPrivileges(s *pipelinev1.Step, sp *field.Path) field.ErrorList {
	errs := validateStepSecurityContext(s.SecurityContext, sp.Child("securityContext"))
	for j, t := range s.Tolerations {
		if slices.Contains(controlPlaneTaints, t.Key) {
			errs = append(errs, field.Forbidden(sp.Child("tolerations").Index(j).Child("key"), fmt.Sprintf(
				"the operator's pods do not tolerate the control plane's taint %s: steps run on the cluster's workers", t.Key)))
		}
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
	}{{"readinessProbe", s.ReadinessProbe}, {"livenessProbe", s.LivenessProbe}, {"startupProbe", s.StartupProbe}} {
		if p.probe == nil {
			continue
		}
		pp := sp.Child(p.name)
		if g := p.probe.HTTPGet; g != nil && g.Host != "" {
			errs = append(errs, field.Forbidden(pp.Child("httpGet", "host"), probeHost))
		}
		if t := p.probe.TCPSocket; t != nil && t.Host != "" {
			errs = append(errs, field.Forbidden(pp.Child("tcpSocket", "host"), probeHost))
		}
	}
	if m := s.PodMetadata; m != nil {
		for _, k := range slices.Sorted(maps.Keys(m.Annotations)) {
			if unconfinedAnnotation(k, m.Annotations[k]) {
				errs = append(errs, field.Forbidden(sp.Child("podMetadata", "annotations").Key(k),
					"the operator's pods run under a seccomp and an AppArmor profile, never unconfined"))
			}
		}
	}
	return errs
}

// probeHost is why a probe of a step may not name a host.
const probeHost = "the operator's probes name no host: the kubelet would connect to it from the node; " +
	"leave host unset to probe the step's own pod"

// validateStepSecurityContext checks sc, the security context of a step's container, at scp:
// what it grants (validateGrants) and the confinement it keeps (validateConfinement).
func validateStepSecurityContext(sc *corev1.SecurityContext, scp *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	return append(validateGrants(sc, scp), validateConfinement(sc, scp)...)
}

// validateGrants refuses a security context, at scp, that makes its container privileged, adds
// it a capability, or asks for privilege escalation or root.
func validateGrants(sc *corev1.SecurityContext, scp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if sc.Privileged != nil && *sc.Privileged {
		errs = append(errs, field.Forbidden(scp.Child("privileged"),
			"the operator runs no privileged container: run such a workload outside a Pipeline"))
	}
	if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
		errs = append(errs, field.Forbidden(scp.Child("capabilities", "add"),
			"the operator's containers add no capability (dropping them is fine)"))
	}
	if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
		errs = append(errs, field.Forbidden(scp.Child("allowPrivilegeEscalation"),
			"the operator's containers do not allow privilege escalation: set it false, or leave it out"))
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		errs = append(errs, field.Forbidden(scp.Child("runAsUser"),
			"the operator's containers do not ask to run as root: leave runAsUser out to run as the image's user"))
	}
	if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
		errs = append(errs, field.Forbidden(scp.Child("runAsNonRoot"),
			"the operator's containers do not ask to run as root: set it true, or leave it out"))
	}
	return errs
}

// validateConfinement refuses a security context, at scp, that lifts what the Pod Security
// baseline level keeps: a seccomp and an AppArmor profile, the container SELinux types, a
// masked /proc.
func validateConfinement(sc *corev1.SecurityContext, scp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined {
		errs = append(errs, field.Forbidden(scp.Child("seccompProfile", "type"),
			"the operator's containers run under a seccomp profile: RuntimeDefault or Localhost, never Unconfined"))
	}
	if sc.AppArmorProfile != nil && sc.AppArmorProfile.Type == corev1.AppArmorProfileTypeUnconfined {
		errs = append(errs, field.Forbidden(scp.Child("appArmorProfile", "type"),
			"the operator's containers run under an AppArmor profile: RuntimeDefault or Localhost, never Unconfined"))
	}
	if o := sc.SELinuxOptions; o != nil {
		sp := scp.Child("seLinuxOptions")
		if o.Type != "" && !slices.Contains(baselineSELinuxTypes, o.Type) {
			errs = append(errs, field.Forbidden(sp.Child("type"), "the operator's containers take no SELinux type but "+
				strings.Join(baselineSELinuxTypes, ", ")))
		}
		if o.User != "" {
			errs = append(errs, field.Forbidden(sp.Child("user"), "the operator's containers take no SELinux user"))
		}
		if o.Role != "" {
			errs = append(errs, field.Forbidden(sp.Child("role"), "the operator's containers take no SELinux role"))
		}
	}
	if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
		errs = append(errs, field.Forbidden(scp.Child("procMount"), "the operator's containers see /proc masked: Default, or leave it out"))
	}
	return errs
}

// unconfinedAnnotation reports whether the pod annotation key=value asks, in the older spelling
// of annotations, for no seccomp or AppArmor profile.
func unconfinedAnnotation(key, value string) bool {
	switch {
	case key == corev1.SeccompPodAnnotationKey, strings.HasPrefix(key, corev1.SeccompContainerAnnotationKeyPrefix):
		return value == corev1.SeccompProfileNameUnconfined
	case strings.HasPrefix(key, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix):
		return value == corev1.DeprecatedAppArmorBetaProfileNameUnconfined
	}
	return false
}
