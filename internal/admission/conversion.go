package admission

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// SetupConversionWebhookWithManager serves the Pipeline CRD's conversion webhook at /convert:
// the apiserver calls it to convert a Pipeline between v1 (the hub) and v1beta1, by the
// conversion functions of api/v1beta1 (pipeline_conversion.go). The manager's scheme must hold
// both versions. It is served whether or not the admission webhooks are: without it, neither
// version can read what the other stored.
func SetupConversionWebhookWithManager(mgr ctrl.Manager) error {
	// Without both versions in the scheme the builder would skip /convert without a word.
	ok, err := conversion.IsConvertible(mgr.GetScheme(), &pipelinev1.Pipeline{})
	if err != nil || !ok {
		return fmt.Errorf("serve the Pipeline conversion webhook: the manager's scheme must hold v1 and v1beta1 (convertible: %t): %w", ok, err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &pipelinev1.Pipeline{}).Complete(); err != nil {
		return fmt.Errorf("serve the Pipeline conversion webhook: %w", err)
	}
	return nil
}
