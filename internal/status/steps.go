package status

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// stepState is the state of one step derived from its children.
type stepState struct {
	status  pipelinev1.StepStatus
	failure string
	waiting string
}

// computeStepState derives the state of step i from its Deployment and Service.
func computeStepState(p *pipelinev1.Pipeline, i int, d *appsv1.Deployment, svc *corev1.Service) stepState {
	s := stepState{status: pipelinev1.StepStatus{
		Name:            resources.StepName(p, i),
		DeploymentName:  resources.StepObjectName(p, i),
		URL:             resources.StepURL(p, i),
		Replicas:        resources.StepReplicas(p, i),
		DeploymentPhase: pipelinev1.DeploymentPhasePending,
		ServicePhase:    pipelinev1.ServicePhasePending,
	}}
	if svc != nil && svc.Spec.ClusterIP != "" {
		s.status.ServicePhase = pipelinev1.ServicePhaseReady
	}
	if d != nil {
		s.status.ReadyReplicas = d.Status.ReadyReplicas
	}
	s.classify(resources.StepLabel(p, i), s.status.DeploymentName, d, s.status.ServicePhase == pipelinev1.ServicePhaseReady,
		func(d *appsv1.Deployment) (pipelinev1.DeploymentPhase, string) {
			return stepDeploymentPhase(p, i, d)
		})
	return s
}

// classify sets the deployment phase of s, and its failure or what it waits for, from d, the
// Deployment (nil when the one named name is missing), and whether the Service named name has a
// cluster IP; phase classifies d. label begins the messages.
func (s *stepState) classify(label, name string, d *appsv1.Deployment, serviceReady bool,
	phase func(*appsv1.Deployment) (pipelinev1.DeploymentPhase, string)) {
	if d == nil {
		s.waiting = fmt.Sprintf("%s: Deployment %s does not exist yet", label, name)
		return
	}
	p, detail := phase(d)
	s.status.DeploymentPhase = p
	switch {
	case p == pipelinev1.DeploymentPhaseFailed:
		s.failure = fmt.Sprintf("%s: Deployment %s %s", label, d.Name, detail)
	case p != pipelinev1.DeploymentPhaseAvailable:
		s.waiting = fmt.Sprintf("%s: Deployment %s %s", label, d.Name, detail)
	case !serviceReady:
		s.waiting = fmt.Sprintf("%s: Service %s has no cluster IP yet", label, name)
	}
}

// deploymentPhase classifies a Deployment and says why, for messages.
func deploymentPhase(d *appsv1.Deployment) (pipelinev1.DeploymentPhase, string) {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return pipelinev1.DeploymentPhaseFailed, "exceeded its progress deadline: " + c.Message
		}
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return pipelinev1.DeploymentPhaseFailed, "cannot create pods: " + c.Message
		}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return pipelinev1.DeploymentPhaseProgressing, "has a rollout that has not started yet"
	case st.UpdatedReplicas < want:
		return pipelinev1.DeploymentPhaseProgressing, fmt.Sprintf("is rolling out: %d of %d pods updated", st.UpdatedReplicas, want)
	case st.Replicas > st.UpdatedReplicas:
		return pipelinev1.DeploymentPhaseProgressing, fmt.Sprintf("is rolling out: %d old pods pending termination", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < want:
		return pipelinev1.DeploymentPhaseProgressing, fmt.Sprintf("has %d of %d pods available", st.AvailableReplicas, want)
	}
	return pipelinev1.DeploymentPhaseAvailable, "is available"
}

// addRouterState records the state of the router, when enabled, in st and reports whether it is
// available (true without a router); its failure goes to problems, what it waits for to waiting.
func addRouterState(st *pipelinev1.PipelineStatus, p *pipelinev1.Pipeline, obs *Observed, problems *[]problem.Problem, waiting *[]string) bool {
	if !resources.RouterEnabled(p) {
		return true
	}
	rs := computeRouterState(p, obs.RouterDeployment, obs.RouterService)
	st.DetailPhase.RouterPhase = rs.status.DeploymentPhase
	switch {
	case rs.failure != "":
		*problems = append(*problems, problem.Problem{Reason: pipelinev1.ReasonRouterFailed, Message: rs.failure})
		return false
	case rs.waiting != "":
		*waiting = append(*waiting, rs.waiting)
		return false
	}
	return true
}

// computeRouterState derives the state of the router from its Deployment and Service, the way
// computeStepState does for a step.
func computeRouterState(p *pipelinev1.Pipeline, d *appsv1.Deployment, svc *corev1.Service) stepState {
	s := stepState{status: pipelinev1.StepStatus{DeploymentPhase: pipelinev1.DeploymentPhasePending}}
	s.classify("router", resources.RouterObjectName(p), d, svc != nil && svc.Spec.ClusterIP != "", deploymentPhase)
	return s
}
