package pipeline

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status"
	"github.com/ndsl-cn/pipeline-operator/internal/status/statustest"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestMayHaveStaleIngress(t *testing.T) {
	p := testenv.Sample(t, "default")
	p.Generation = 3
	p.Status = status.Compute(p, convergedWorld())
	if mayHaveStaleChildren(p) {
		t.Fatalf("a converged Pipeline without an Ingress looks for stale children")
	}
	p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{}}
	if !mayHaveStaleChildren(p) {
		t.Errorf("a status without an Ingress state does not match a spec with an Ingress")
	}
	o := convergedWorld()
	o.Ingress = &networkingv1.Ingress{}
	p.Status = status.Compute(p, o)
	if mayHaveStaleChildren(p) {
		t.Errorf("a converged Pipeline with an Ingress looks for stale children")
	}
	p.Spec.Expose = nil
	if !mayHaveStaleChildren(p) {
		t.Errorf("an Ingress state in the status of a spec without an Ingress does not start the stale search")
	}
}

func TestMayHaveStaleChildren(t *testing.T) {
	p := testenv.Sample(t, "default")
	p.Generation = 1
	if mayHaveStaleChildren(p) {
		t.Errorf("a new Pipeline, never changed and never reconciled, looks for stale children")
	}
	p.Generation = 2
	if !mayHaveStaleChildren(p) {
		t.Errorf("a Pipeline changed before its first successful pass does not look for stale children")
	}
	p.Status = status.Compute(p, convergedWorld())
	if mayHaveStaleChildren(p) {
		t.Fatalf("a converged Pipeline looks for stale children")
	}
	p.Generation = 3
	if !mayHaveStaleChildren(p) {
		t.Errorf("a changed spec does not start the stale search")
	}
	// A pass the apiserver refused a child acted on the generation (observedGeneration), but
	// did not write every child: the next pass still looks.
	p.Status = status.Compute(p, &status.Observed{PV: statustest.BoundPV(), PVC: statustest.BoundPVC(),
		Deployments: convergedWorld().Deployments, Services: convergedWorld().Services,
		Err: problem.WithReason(pipelinev1.ReasonApplyRefused, errors.New("apply Deployment d: denied"))})
	if p.Status.ObservedGeneration != 3 {
		t.Fatalf("observedGeneration %d after a refused pass of generation 3", p.Status.ObservedGeneration)
	}
	if !mayHaveStaleChildren(p) {
		t.Errorf("a pass refused by the apiserver ends the stale search")
	}
	p.Generation, p.Status.ObservedGeneration = 1, 1
	p.Spec.Steps[0].Name = "renamed"
	if !mayHaveStaleChildren(p) {
		t.Errorf("a status naming other children (an earlier naming) does not start the stale search")
	}
}

func TestMayHaveStaleVolume(t *testing.T) {
	p := testenv.Sample(t, "default")
	p.Generation = 2
	o := convergedWorld()
	o.PVName = "default-facedetection-pipeline-1a2b3c4d"
	p.Status = status.Compute(p, o)
	if mayHaveStaleChildren(p) {
		t.Errorf("a converged Pipeline on the volume an earlier version named looks for stale children")
	}
	p.Spec.ModelStorage.NFS.Path = "/elsewhere"
	if !mayHaveStaleChildren(p) {
		t.Errorf("a storage change (a new claim) does not start the stale search")
	}
	p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim,
		ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: p.Status.Storage.ClaimName}}
	if !mayHaveStaleChildren(p) {
		t.Errorf("a volume in the status of storage that has none does not start the stale search")
	}
}

func TestMayHaveStaleRouter(t *testing.T) {
	p := testenv.RoutedSample(t)
	p.Generation = 2
	p.Status.ObservedGeneration = 2
	p.Status.Storage.ClaimName = resources.ClaimName(p)
	p.Status.Storage.VolumeName = resources.PVName(p)
	for i := range p.Spec.Steps {
		p.Status.Steps = append(p.Status.Steps, pipelinev1.StepStatus{Name: p.Spec.Steps[i].Name, DeploymentName: resources.StepObjectName(p, i)})
	}
	p.Status.RouterState = pipelinev1.DeploymentStateAvailable
	status.SetReconciled(&p.Status, 2, nil)
	if mayHaveStaleChildren(p) {
		t.Error("a converged Pipeline with its router looks for stale children")
	}
	off := p.DeepCopy()
	withoutRouter(off)
	if !mayHaveStaleChildren(off) {
		t.Error("a Pipeline whose status still shows a router it no longer asks for does not look for stale children")
	}
	off.Status.RouterState = ""
	if mayHaveStaleChildren(off) {
		t.Error("a converged Pipeline without a router looks for stale children")
	}
}

// convergedWorld is what a pass observes of a healthy two-step NFS Pipeline.
func convergedWorld() *status.Observed {
	return &status.Observed{
		PV:          statustest.BoundPV(),
		PVC:         statustest.BoundPVC(),
		Deployments: []*appsv1.Deployment{statustest.AvailableDeployment(1), statustest.AvailableDeployment(1)},
		Services:    []*corev1.Service{statustest.ReadyService(), statustest.ReadyService()},
	}
}
