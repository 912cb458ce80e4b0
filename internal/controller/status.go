package controller

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// problem is something about a Pipeline that needs a person: a Degraded reason and message.
type problem struct {
	reason  string
	message string
	// notice marks a problem that degrades the Pipeline but stops nothing (a step's node is
	// cordoned while its pods keep serving): it makes Degraded True, but neither the phase
	// failed nor the rollout failed.
	notice bool
}

// failing reports whether any of problems stops the Pipeline: one that is not a notice.
func failing(problems []problem) bool {
	for _, pr := range problems {
		if !pr.notice {
			return true
		}
	}
	return false
}

// observed is what one pass saw of a Pipeline's children, the input of its status.
type observed struct {
	// pv is the model PersistentVolume; nil when missing or when the storage type has none.
	pv *corev1.PersistentVolume
	// pvc is the claim the steps mount; nil when missing.
	pvc *corev1.PersistentVolumeClaim
	// deployments and services are indexed like spec.steps; nil entries are missing.
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	// autoscalers are the HorizontalPodAutoscalers of autoscaled steps, indexed like spec.steps.
	autoscalers []*autoscalingv2.HorizontalPodAutoscaler
	// ingress is the Ingress of spec.expose.ingress; nil when missing or not asked for.
	ingress *networkingv1.Ingress
	// routerDeployment and routerService are the router's; nil when missing or not enabled.
	routerDeployment *appsv1.Deployment
	routerService    *corev1.Service
	// placements are indexed like spec.steps: the node each step is pinned to.
	placements []placement
	// problems found while reconciling (name conflicts, missing nodes or claims).
	problems []problem
	// err is the error that stopped the pass, if any.
	err error
}

// autoscaler is the HorizontalPodAutoscaler of step i, nil when missing or not asked for.
func (o *observed) autoscaler(i int) *autoscalingv2.HorizontalPodAutoscaler {
	if i < len(o.autoscalers) {
		return o.autoscalers[i]
	}
	return nil
}

// stepState is the state of one step derived from its children.
type stepState struct {
	status  pipelinev1beta1.StepStatus
	failure string
	waiting string
}

// computeStatus rebuilds the status of p from what the pass observed. Conditions keep their
// last transition time while their status does not change.
func computeStatus(p *pipelinev1beta1.Pipeline, obs *observed) pipelinev1beta1.PipelineStatus {
	st := pipelinev1beta1.PipelineStatus{
		ObservedGeneration: p.Status.ObservedGeneration,
		Conditions:         append([]metav1.Condition(nil), p.Status.Conditions...),
	}
	if obs.err == nil {
		st.ObservedGeneration = p.Generation
	}

	// Problems arrive in the order concurrent steps found them; sorted, the same world always
	// gives the same status.
	problems := append([]problem(nil), obs.problems...)
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].message < problems[j].message })
	var waiting []string

	// Storage.
	if ownsVolume(p) {
		st.PVName = pvName(p)
		if obs.pv == nil {
			waiting = append(waiting, fmt.Sprintf("PersistentVolume %s does not exist yet", st.PVName))
		} else {
			st.DetailPhase.PVPhase = obs.pv.Status.Phase
			if obs.pv.Status.Phase == corev1.VolumeFailed {
				problems = append(problems, problem{reason: pipelinev1beta1.ReasonStorageFailed,
					message: fmt.Sprintf("PersistentVolume %s failed: %s", obs.pv.Name, orDefault(obs.pv.Status.Message, "no message"))})
			}
		}
	}
	st.PVCName = claimName(p)
	switch {
	case obs.pvc == nil:
		waiting = append(waiting, fmt.Sprintf("PersistentVolumeClaim %s does not exist yet", st.PVCName))
	case obs.pvc.Status.Phase == corev1.ClaimLost:
		st.DetailPhase.PVCPhase = obs.pvc.Status.Phase
		problems = append(problems, problem{reason: pipelinev1beta1.ReasonStorageFailed,
			message: fmt.Sprintf("PersistentVolumeClaim %s lost its volume %s", obs.pvc.Name, obs.pvc.Spec.VolumeName)})
	case obs.pvc.Status.Phase != corev1.ClaimBound:
		st.DetailPhase.PVCPhase = obs.pvc.Status.Phase
		waiting = append(waiting, fmt.Sprintf("PersistentVolumeClaim %s is %s", obs.pvc.Name, orDefault(string(obs.pvc.Status.Phase), "not bound")))
	default:
		st.DetailPhase.PVCPhase = obs.pvc.Status.Phase
	}
	storageReady := obs.pvc != nil && obs.pvc.Status.Phase == corev1.ClaimBound && (obs.pv != nil || !ownsVolume(p))

	// Steps.
	available := 0
	models := make([]string, 0, len(p.Spec.Steps))
	for i := range p.Spec.Steps {
		models = append(models, p.Spec.Steps[i].Model)
		s := computeStepState(p, i, obs.deployments[i], obs.services[i])
		scalingStatus(p, i, &s.status, obs.deployments[i], obs.autoscaler(i))
		st.DetailPhase.StepsPhase = append(st.DetailPhase.StepsPhase, s.status)
		switch {
		case s.failure != "":
			problems = append(problems, problem{reason: pipelinev1beta1.ReasonStepFailed, message: s.failure})
		case s.waiting != "":
			waiting = append(waiting, s.waiting)
		default:
			available++
		}
	}
	st.ReadySteps = fmt.Sprintf("%d/%d", available, len(p.Spec.Steps))
	routerReady := addRouterState(&st, p, obs, &problems, &waiting)
	setEntry(&st, p, obs)
	st.Models = strings.Join(models, ",")
	allAvailable := storageReady && available == len(p.Spec.Steps) && routerReady

	setAvailable(&st, p.Generation, allAvailable, storageReady, waiting)
	failed := failing(problems)
	setProgressing(&st, p.Generation, allAvailable, failed, waiting)
	setPlacementStatus(&st, p, obs.placements)
	setDegraded(&st, p.Generation, problems)
	setReconciled(&st, p.Generation, obs.err)

	switch {
	case !p.DeletionTimestamp.IsZero():
		st.Phase = pipelinev1beta1.PipelinePhaseDeleting
	case failed:
		st.Phase = pipelinev1beta1.PipelinePhaseFailed
	case allAvailable:
		st.Phase = pipelinev1beta1.PipelinePhaseRunning
	default:
		st.Phase = pipelinev1beta1.PipelinePhaseCreating
	}
	return st
}

// setEntry reports how the entry step is reached from outside the cluster. External addresses
// come from load balancers and ingress controllers that may take minutes or never come (no
// controller in the cluster): the phase does not wait for them, the URL appears once known.
func setEntry(st *pipelinev1beta1.PipelineStatus, p *pipelinev1beta1.Pipeline, obs *observed) {
	var svc *corev1.Service
	switch {
	case routerEnabled(p):
		svc = obs.routerService
	case len(obs.services) > 0:
		svc = obs.services[0]
	}
	if svc != nil && (svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer) &&
		len(svc.Spec.Ports) > 0 {
		st.NodePort = svc.Spec.Ports[0].NodePort
	}
	if ingressSpec(p) != nil {
		st.DetailPhase.IngressPhase = ingressPhase(obs.ingress)
	}
	st.URL = entryURL(p, svc, obs.ingress)
}

// ingressPhase is Ready once an ingress controller published an address for the Ingress.
func ingressPhase(ing *networkingv1.Ingress) pipelinev1beta1.IngressPhase {
	if ing != nil && ingressAddress(ing) != "" {
		return pipelinev1beta1.IngressPhaseReady
	}
	return pipelinev1beta1.IngressPhasePending
}

// entryURL is where the entry step is reached from outside the cluster, empty until known:
// through the Ingress, http(s)://<host or its load balancer address><path>; else through a
// LoadBalancer Service, http://<its address>:<port>.
func entryURL(p *pipelinev1beta1.Pipeline, svc *corev1.Service, ing *networkingv1.Ingress) string {
	if spec := ingressSpec(p); spec != nil {
		if ing == nil {
			return ""
		}
		host := spec.Host
		if host == "" {
			host = urlHost(ingressAddress(ing))
		}
		if host == "" {
			return ""
		}
		scheme := "http"
		if spec.TLSSecretName != "" {
			scheme = "https"
		}
		return scheme + "://" + host + ingressPath(p)
	}
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.Ports) == 0 {
		return ""
	}
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		if addr := orDefault(lb.IP, lb.Hostname); addr != "" {
			return "http://" + net.JoinHostPort(addr, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
		}
	}
	return ""
}

// ingressAddress is the first address an ingress controller published for ing.
func ingressAddress(ing *networkingv1.Ingress) string {
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		if addr := orDefault(lb.IP, lb.Hostname); addr != "" {
			return addr
		}
	}
	return ""
}

// urlHost writes an address as the host of a URL: IPv6 addresses go in brackets.
func urlHost(addr string) string {
	if strings.Contains(addr, ":") {
		return "[" + addr + "]"
	}
	return addr
}

// addRouterState records the state of the router, when enabled, in st and reports whether it is
// available (true without a router); its failure goes to problems, what it waits for to waiting.
func addRouterState(st *pipelinev1beta1.PipelineStatus, p *pipelinev1beta1.Pipeline, obs *observed, problems *[]problem, waiting *[]string) bool {
	if !routerEnabled(p) {
		return true
	}
	rs := computeRouterState(p, obs.routerDeployment, obs.routerService)
	st.DetailPhase.RouterPhase = rs.status.DeploymentPhase
	switch {
	case rs.failure != "":
		*problems = append(*problems, problem{reason: pipelinev1beta1.ReasonRouterFailed, message: rs.failure})
		return false
	case rs.waiting != "":
		*waiting = append(*waiting, rs.waiting)
		return false
	}
	return true
}

// computeRouterState derives the state of the router from its Deployment and Service, the way
// computeStepState does for a step.
func computeRouterState(p *pipelinev1beta1.Pipeline, d *appsv1.Deployment, svc *corev1.Service) stepState {
	s := stepState{status: pipelinev1beta1.StepStatus{DeploymentPhase: pipelinev1beta1.DeploymentPhasePending}}
	s.classify("router", routerObjectName(p), d, svc != nil && svc.Spec.ClusterIP != "", deploymentPhase)
	return s
}

// computeStepState derives the state of step i from its Deployment and Service.
func computeStepState(p *pipelinev1beta1.Pipeline, i int, d *appsv1.Deployment, svc *corev1.Service) stepState {
	s := stepState{status: pipelinev1beta1.StepStatus{
		Name:            stepName(p, i),
		DeploymentName:  stepObjectName(p, i),
		URL:             stepURL(p, i),
		Replicas:        stepReplicas(p, i),
		DeploymentPhase: pipelinev1beta1.DeploymentPhasePending,
		ServicePhase:    pipelinev1beta1.ServicePhasePending,
	}}
	if svc != nil && svc.Spec.ClusterIP != "" {
		s.status.ServicePhase = pipelinev1beta1.ServicePhaseReady
	}
	if d != nil {
		s.status.ReadyReplicas = d.Status.ReadyReplicas
	}
	s.classify(stepLabel(p, i), s.status.DeploymentName, d, s.status.ServicePhase == pipelinev1beta1.ServicePhaseReady,
		func(d *appsv1.Deployment) (pipelinev1beta1.DeploymentPhase, string) {
			return stepDeploymentPhase(p, i, d)
		})
	return s
}

// classify sets the deployment phase of s, and its failure or what it waits for, from d, the
// Deployment (nil when the one named name is missing), and whether the Service named name has a
// cluster IP; phase classifies d. label begins the messages.
func (s *stepState) classify(label, name string, d *appsv1.Deployment, serviceReady bool,
	phase func(*appsv1.Deployment) (pipelinev1beta1.DeploymentPhase, string)) {
	if d == nil {
		s.waiting = fmt.Sprintf("%s: Deployment %s does not exist yet", label, name)
		return
	}
	p, detail := phase(d)
	s.status.DeploymentPhase = p
	switch {
	case p == pipelinev1beta1.DeploymentPhaseFailed:
		s.failure = fmt.Sprintf("%s: Deployment %s %s", label, d.Name, detail)
	case p != pipelinev1beta1.DeploymentPhaseAvailable:
		s.waiting = fmt.Sprintf("%s: Deployment %s %s", label, d.Name, detail)
	case !serviceReady:
		s.waiting = fmt.Sprintf("%s: Service %s has no cluster IP yet", label, name)
	}
}

// deploymentPhase classifies a Deployment and says why, for messages.
func deploymentPhase(d *appsv1.Deployment) (pipelinev1beta1.DeploymentPhase, string) {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return pipelinev1beta1.DeploymentPhaseFailed, "exceeded its progress deadline: " + c.Message
		}
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return pipelinev1beta1.DeploymentPhaseFailed, "cannot create pods: " + c.Message
		}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return pipelinev1beta1.DeploymentPhaseProgressing, "has a rollout that has not started yet"
	case st.UpdatedReplicas < want:
		return pipelinev1beta1.DeploymentPhaseProgressing, fmt.Sprintf("is rolling out: %d of %d pods updated", st.UpdatedReplicas, want)
	case st.Replicas > st.UpdatedReplicas:
		return pipelinev1beta1.DeploymentPhaseProgressing, fmt.Sprintf("is rolling out: %d old pods pending termination", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < want:
		return pipelinev1beta1.DeploymentPhaseProgressing, fmt.Sprintf("has %d of %d pods available", st.AvailableReplicas, want)
	}
	return pipelinev1beta1.DeploymentPhaseAvailable, "is available"
}

func setAvailable(st *pipelinev1beta1.PipelineStatus, gen int64, available, storageReady bool, waiting []string) {
	c := metav1.Condition{Type: pipelinev1beta1.ConditionAvailable, ObservedGeneration: gen}
	switch {
	case available:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, pipelinev1beta1.ReasonAllStepsAvailable, "The model storage is bound and every step is available"
	case !storageReady:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, pipelinev1beta1.ReasonStorageNotBound, joinMessages(waiting)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, pipelinev1beta1.ReasonStepsUnavailable, st.ReadySteps+" steps available; "+joinMessages(waiting)
	}
	if !available && len(waiting) == 0 {
		c.Message = st.ReadySteps + " steps available"
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func setProgressing(st *pipelinev1beta1.PipelineStatus, gen int64, available, degraded bool, waiting []string) {
	c := metav1.Condition{Type: pipelinev1beta1.ConditionProgressing, ObservedGeneration: gen}
	switch {
	case degraded:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, pipelinev1beta1.ReasonRolloutFailed, "The rollout cannot complete: see the Degraded condition"
	case available:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, pipelinev1beta1.ReasonRolloutComplete, "Every step runs the current spec"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, pipelinev1beta1.ReasonRollingOut, joinMessages(waiting)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func setDegraded(st *pipelinev1beta1.PipelineStatus, gen int64, problems []problem) {
	c := metav1.Condition{Type: pipelinev1beta1.ConditionDegraded, ObservedGeneration: gen,
		Status: metav1.ConditionFalse, Reason: pipelinev1beta1.ReasonAsExpected, Message: "No problems found"}
	if len(problems) > 0 {
		msgs := make([]string, 0, len(problems))
		for _, pr := range problems {
			msgs = append(msgs, pr.message)
		}
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, problems[0].reason, joinMessages(msgs)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func setReconciled(st *pipelinev1beta1.PipelineStatus, gen int64, err error) {
	c := metav1.Condition{Type: pipelinev1beta1.ConditionReconciled, ObservedGeneration: gen,
		Status: metav1.ConditionTrue, Reason: pipelinev1beta1.ReasonReconcileSucceeded, Message: "The children match the spec"}
	if err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reconcileErrorReason(err), truncate(err.Error(), 1024)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// joinMessages joins messages for a condition, keeping it readable and within the API's bound.
func joinMessages(msgs []string) string {
	return truncate(strings.Join(msgs, "; "), 1024)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
