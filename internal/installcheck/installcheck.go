// Package installcheck asks a cluster whether the operator it installed answers, as `helm test`
// does after an install (the chart's test pod runs the manager with --check-install): a Pipeline
// sent as a server-side dry run, nothing stored, must come back from the defaulting webhook, and
// one that only the validating webhook refuses must be refused by it.
package installcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

// validatingWebhook is the name of the Pipeline validating webhook, which its refusals carry.
const validatingWebhook = "vpipeline.distri-infer.ndsl.cn"

// Run makes its two dry runs in namespace ns with c, whose user needs only the right to create
// Pipelines there, and returns what did not answer as it should. The Pipelines are the sample's,
// their storage an existing claim (inline storage asks for the right to create volumes).
func Run(ctx context.Context, c client.Client, ns string) error {
	admitted, err := probe(ns)
	if err != nil {
		return err
	}
	if err := c.Create(ctx, admitted, client.DryRunAll); err != nil {
		return fmt.Errorf("a valid Pipeline was refused: %w", err)
	}
	if !controllerutil.ContainsFinalizer(admitted, pipelinev1.CleanupFinalizer) {
		return errors.New("a valid Pipeline came back without the finalizer the defaulting webhook adds: the defaulting webhook did not answer")
	}

	refused, err := probe(ns)
	if err != nil {
		return err
	}
	refused.Spec.Steps[0].Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	err = c.Create(ctx, refused, client.DryRunAll)
	switch {
	case err == nil:
		return errors.New("a Pipeline tolerating every taint was admitted: the validating webhook did not answer")
	case !strings.Contains(err.Error(), validatingWebhook):
		return fmt.Errorf("a Pipeline tolerating every taint was refused, but not by the validating webhook: %w", err)
	}
	return nil
}

// probe is the sample Pipeline in ns with an existing claim as storage, named for the check.
func probe(ns string) (*pipelinev1.Pipeline, error) {
	p, err := samples.PipelineV1(ns)
	if err != nil {
		return nil, err
	}
	p.Name = "pipeline-operator-install-check"
	p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim,
		ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: "install-check"}}
	return p, nil
}
