package status

import (
	"cmp"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// stepState is the state of one step derived from its children.
type stepState struct {
	status  pipelinev1.StepStatus
	failure string
	waiting string
	// detail is what classify said of the Deployment ("Deployment <name> is available"); empty
	// when it is missing.
	detail string
}

// computeStepReadiness derives the state of step i from its Deployment and Service, whose URL
// is named in the cluster's DNS domain, domain, and its state (status.steps[].state) also from
// its pods (nil: not looked at; see NeedsPods), and withdrawn saying its model
// storage was. A step whose pods fail (a crash loop) fails; one whose pods run but are not
// ready waits, for its model to load.
func computeStepReadiness(p *pipelinev1.Pipeline, i int, d *appsv1.Deployment, svc *corev1.Service, domain resources.ClusterDomain,
	pods []corev1.Pod, withdrawn bool) stepState {
	s := stepDeploymentStatus(p, i, d, svc, domain)
	label := resources.StepLabel(p, i)
	state, reason, msg, since := readiness(d, s.status.DeploymentState, s.detail, pods, withdrawn)
	s.status.State, s.status.Reason, s.status.Message = state, problem.Truncate(reason, maxStepReason), problem.Truncate(msg, problem.MaxMessageLength)
	s.status.LoadingSince = since
	switch {
	case withdrawn:
		// Its Deployment is scaled to zero, which a Deployment counts as available.
		s.failure, s.waiting = "", label+": "+msg
	case state == pipelinev1.StepStateFailed:
		s.failure, s.waiting = cmp.Or(s.failure, label+": "+msg), ""
	case state == pipelinev1.StepStateLoading:
		s.waiting = label + ": " + msg
	}
	return s
}

// stepDeploymentStatus derives the state of step i from its Deployment and Service alone.
func stepDeploymentStatus(p *pipelinev1.Pipeline, i int, d *appsv1.Deployment, svc *corev1.Service, domain resources.ClusterDomain) stepState {
	s := stepState{status: pipelinev1.StepStatus{
		Name:            resources.StepName(p, i),
		DeploymentName:  resources.StepObjectName(p, i),
		URL:             resources.StepURL(p, i, domain),
		Replicas:        ptr.To(resources.StepReplicas(p, i)),
		ReadyReplicas:   ptr.To[int32](0),
		DeploymentState: pipelinev1.DeploymentStatePending,
		ServiceState:    pipelinev1.ServiceStatePending,
	}}
	if svc != nil && svc.Spec.ClusterIP != "" {
		s.status.ServiceState = pipelinev1.ServiceStateReady
	}
	if d != nil {
		s.status.ReadyReplicas = ptr.To(d.Status.ReadyReplicas)
	}
	s.classify(resources.StepLabel(p, i), s.status.DeploymentName, d, s.status.ServiceState == pipelinev1.ServiceStateReady,
		func(d *appsv1.Deployment) (pipelinev1.DeploymentState, string) {
			return stepDeploymentState(p, i, d)
		})
	return s
}

// classify sets the deployment state of s, and its failure or what it waits for, from d, the
// Deployment (nil when the one named name is missing), and whether the Service named name has a
// cluster IP; state classifies d. label begins the messages.
func (s *stepState) classify(label, name string, d *appsv1.Deployment, serviceReady bool,
	state func(*appsv1.Deployment) (pipelinev1.DeploymentState, string)) {
	if d == nil {
		s.waiting = fmt.Sprintf("%s: Deployment %s does not exist yet", label, name)
		return
	}
	ds, detail := state(d)
	s.status.DeploymentState, s.detail = ds, fmt.Sprintf("Deployment %s %s", d.Name, detail)
	switch {
	case ds == pipelinev1.DeploymentStateFailed:
		s.failure = label + ": " + s.detail
	case ds != pipelinev1.DeploymentStateAvailable:
		s.waiting = label + ": " + s.detail
	case !serviceReady:
		s.waiting = fmt.Sprintf("%s: Service %s has no cluster IP yet", label, name)
	}
}

// deploymentState classifies a Deployment and says why, for messages.
func deploymentState(d *appsv1.Deployment) (pipelinev1.DeploymentState, string) {
	if _, why, failed := deploymentFailure(d); failed {
		return pipelinev1.DeploymentStateFailed, why
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return pipelinev1.DeploymentStateProgressing, "has a rollout that has not started yet"
	case st.UpdatedReplicas < want:
		return pipelinev1.DeploymentStateProgressing, fmt.Sprintf("is rolling out: %d of %d pods updated", st.UpdatedReplicas, want)
	case st.Replicas > st.UpdatedReplicas:
		return pipelinev1.DeploymentStateProgressing, fmt.Sprintf("is rolling out: %d old pods pending termination", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < want:
		return pipelinev1.DeploymentStateProgressing, fmt.Sprintf("has %d of %d pods available", st.AvailableReplicas, want)
	}
	return pipelinev1.DeploymentStateAvailable, "is available"
}

// deploymentFailure reports whether d cannot complete its rollout without a person: its
// progress deadline passed, or it cannot create pods. reason is the condition's reason, why says
// it for messages.
func deploymentFailure(d *appsv1.Deployment) (reason, why string, failed bool) {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return c.Reason, "exceeded its progress deadline: " + c.Message, true
		}
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return cmp.Or(c.Reason, "ReplicaFailure"), "cannot create pods: " + c.Message, true
		}
	}
	return "", "", false
}

// addRouterState records the state of the router, when dataPath.mode is Router, in st and reports
// whether it is available (true without a router); its failure goes to problems, what it waits
// for to waiting.
func addRouterState(st *pipelinev1.PipelineStatus, p *pipelinev1.Pipeline, obs *Observed, problems *[]problem.Problem, waiting *[]string) bool {
	if !p.Spec.RouterEnabled() {
		return true
	}
	rs := computeRouterState(p, obs.RouterDeployment, obs.RouterService)
	st.RouterState = rs.status.DeploymentState
	if _, msg, ok := podFailure(obs.RouterPods); ok && rs.failure == "" {
		// A router that stops at start (a tensor mapping its models refuse) crash-loops while
		// its Deployment only says it is not available: its pods say why.
		rs.failure = "router: " + msg
	}
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
// computeStepReadiness does for a step.
func computeRouterState(p *pipelinev1.Pipeline, d *appsv1.Deployment, svc *corev1.Service) stepState {
	s := stepState{status: pipelinev1.StepStatus{DeploymentState: pipelinev1.DeploymentStatePending}}
	s.classify("router", resources.RouterObjectName(p), d, svc != nil && svc.Spec.ClusterIP != "", deploymentState)
	return s
}
