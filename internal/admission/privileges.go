package admission

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// validateStepPrivileges refuses what the operator's own identity may not create
// (config/policy/guard.yaml): a privileged container, an added capability. Refused here, the
// author reads why in the step's fields; left to the policy, the Pipeline would stop at
// ApplyRefused.
func validateStepPrivileges(s *pipelinev1.Step, sp *field.Path) field.ErrorList {
	sc := s.SecurityContext
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	scp := sp.Child("securityContext")
	if sc.Privileged != nil && *sc.Privileged {
		errs = append(errs, field.Forbidden(scp.Child("privileged"),
			"the operator runs no privileged container: run such a workload outside a Pipeline"))
	}
	if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
		errs = append(errs, field.Forbidden(scp.Child("capabilities", "add"),
			"the operator's containers add no capability (dropping them is fine)"))
	}
	return errs
}
