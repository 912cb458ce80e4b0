// Package status computes a Pipeline's status, as a pure function, from what one pass observed
// of its children (Observed): phases, per-step state, placement and the conditions.
package status

import (
	"cmp"
	"errors"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// Observed is what one pass saw of a Pipeline's children, the input of its status.
type Observed struct {
	// PV is the model PersistentVolume; nil when missing or when the storage type has none.
	PV *corev1.PersistentVolume
	// PVName is the name of the model PersistentVolume the pass wants (NFS, CSI and
	// ModelStorageClass storage): resources.PVName, or the name of the volume an earlier version
	// made for the current claim; empty is resources.PVName.
	PVName string
	// PVC is the claim the steps mount; nil when missing.
	PVC *corev1.PersistentVolumeClaim
	// Deployments and services are indexed like spec.steps; nil entries are missing.
	Deployments []*appsv1.Deployment
	Services    []*corev1.Service
	// Autoscalers are the HorizontalPodAutoscalers of autoscaled steps, indexed like spec.steps.
	Autoscalers []*autoscalingv2.HorizontalPodAutoscaler
	// Ingress is the Ingress of spec.expose.ingress; nil when missing or not asked for.
	Ingress *networkingv1.Ingress
	// RouterDeployment and RouterService are the router's; nil when missing or when
	// dataPath.mode is not Router.
	RouterDeployment *appsv1.Deployment
	RouterService    *corev1.Service
	// RouterPods are the router's pods when its state needs them (NeedsPods); nil when the pass
	// did not look.
	RouterPods []corev1.Pod
	// Placements are indexed like spec.steps: the node each step is pinned to.
	Placements []Placement
	// RouterPlacement is the node the router is pinned to; empty without a router location.
	RouterPlacement Placement
	// Problems found while reconciling (name conflicts, missing nodes or claims).
	Problems []problem.Problem
	// StorageHeld is true when the pass could not make the storage the spec asks for (its
	// ModelStorageClass is missing or does not select the namespace): Reconciled is False with
	// the reason, and the spec is observed (a verdict on it, as for a refused child).
	StorageHeld bool
	// Pods are indexed like spec.steps: the pods of a step whose state needs them (NeedsPods);
	// nil when the pass did not look.
	Pods [][]corev1.Pod
	// StorageAccess is, for modelStorageClass storage, whether the class grants the storage
	// and whether it was withdrawn; nil for other storage.
	StorageAccess *StorageAccess
	// Err is the error that stopped the pass, if any.
	Err error
	// ClusterDomain is the cluster's DNS domain, in which the status names the steps' Services
	// (status.steps[].url); empty is resources.DefaultClusterDomain.
	ClusterDomain resources.ClusterDomain
}

// NewObserved is what a pass has observed before it reads anything, for a Pipeline of steps
// steps: no child, and an entry per step in every list indexed like spec.steps.
func NewObserved(steps int) *Observed {
	return &Observed{
		Deployments: make([]*appsv1.Deployment, steps),
		Services:    make([]*corev1.Service, steps),
		Placements:  make([]Placement, steps),
		Autoscalers: make([]*autoscalingv2.HorizontalPodAutoscaler, steps),
		Pods:        make([][]corev1.Pod, steps),
	}
}

// StorageAccess is what the ModelStorageClass of a Pipeline grants its namespace.
type StorageAccess struct {
	// Authorized is true when the class exists and selects the namespace.
	Authorized bool
	// Reason and Message say why not (ModelStorageClassNotFound or NotPermitted), or that it does.
	Reason, Message string
	// Withdrawn is true once the storage was revoked for longer than the grace: the steps are
	// stopped and the model volume and claim deleted.
	Withdrawn bool
}

// pods are the pods of step i the pass looked at; nil when it did not.
func (o *Observed) pods(i int) []corev1.Pod {
	if i < len(o.Pods) {
		return o.Pods[i]
	}
	return nil
}

// autoscaler is the HorizontalPodAutoscaler of step i, nil when missing or not asked for.
func (o *Observed) autoscaler(i int) *autoscalingv2.HorizontalPodAutoscaler {
	if i < len(o.Autoscalers) {
		return o.Autoscalers[i]
	}
	return nil
}

// Compute rebuilds the status of p from what the pass observed. Conditions keep their
// last transition time while their status does not change.
func Compute(p *pipelinev1.Pipeline, obs *Observed) pipelinev1.PipelineStatus {
	st := pipelinev1.PipelineStatus{
		ObservedGeneration: observedGeneration(p, obs.Err),
		Conditions:         append([]metav1.Condition(nil), p.Status.Conditions...),
	}

	// Problems arrive in the order concurrent steps found them; sorted, the same world always
	// gives the same status.
	problems := append([]problem.Problem(nil), obs.Problems...)
	// A child write the apiserver refuses for what it is needs a person as much as a missing node.
	for _, err := range problem.Find(obs.Err, pipelinev1.ReasonApplyRefused) {
		problems = append(problems, problem.Problem{Reason: pipelinev1.ReasonApplyRefused, Message: err.Error()})
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Message < problems[j].Message })
	var waiting []string

	// Storage.
	if resources.OwnsVolume(p) {
		st.Storage.VolumeName = cmp.Or(obs.PVName, resources.PVName(p))
		if obs.PV == nil {
			waiting = append(waiting, fmt.Sprintf("PersistentVolume %s does not exist yet", st.Storage.VolumeName))
		} else {
			st.Storage.VolumeState = obs.PV.Status.Phase
			if obs.PV.Status.Phase == corev1.VolumeFailed {
				problems = append(problems, problem.Problem{Reason: pipelinev1.ReasonStorageFailed,
					Message: fmt.Sprintf("PersistentVolume %s failed: %s", obs.PV.Name, cmp.Or(obs.PV.Status.Message, "no message"))})
			}
		}
	}
	st.Storage.ClaimName = resources.ClaimName(p)
	switch {
	case obs.PVC == nil:
		waiting = append(waiting, fmt.Sprintf("PersistentVolumeClaim %s does not exist yet", st.Storage.ClaimName))
	case obs.PVC.Status.Phase == corev1.ClaimLost:
		st.Storage.ClaimState = obs.PVC.Status.Phase
		problems = append(problems, problem.Problem{Reason: pipelinev1.ReasonStorageFailed,
			Message: fmt.Sprintf("PersistentVolumeClaim %s lost its volume %s", obs.PVC.Name, obs.PVC.Spec.VolumeName)})
	case obs.PVC.Status.Phase != corev1.ClaimBound:
		st.Storage.ClaimState = obs.PVC.Status.Phase
		waiting = append(waiting, fmt.Sprintf("PersistentVolumeClaim %s is %s", obs.PVC.Name, cmp.Or(string(obs.PVC.Status.Phase), "not bound")))
	default:
		st.Storage.ClaimState = obs.PVC.Status.Phase
	}
	storageReady := obs.PVC != nil && obs.PVC.Status.Phase == corev1.ClaimBound && (obs.PV != nil || !resources.OwnsVolume(p))

	SetStorageAuthorized(&st, p, obs.StorageAccess)
	withdrawn := obs.StorageAccess != nil && obs.StorageAccess.Withdrawn

	// Steps.
	available := 0
	for i := range p.Spec.Steps {
		st.Models = append(st.Models, p.Spec.Steps[i].Model)
		s := computeStepReadiness(p, i, obs.Deployments[i], obs.Services[i], obs.ClusterDomain, obs.pods(i), withdrawn)
		scalingStatus(p, i, &s.status, obs.Deployments[i], obs.autoscaler(i))
		st.Steps = append(st.Steps, s.status)
		switch {
		case s.failure != "":
			problems = append(problems, problem.Problem{Reason: pipelinev1.ReasonStepFailed, Message: s.failure})
		case s.waiting != "":
			waiting = append(waiting, s.waiting)
		default:
			available++
		}
	}
	st.ReadySteps, st.TotalSteps = ptr.To(int32(available)), ptr.To(int32(len(p.Spec.Steps)))
	st.SetSummary()
	routerReady := addRouterState(&st, p, obs, &problems, &waiting)
	setEntry(&st, p, obs)
	allAvailable := storageReady && available == len(p.Spec.Steps) && routerReady

	setAvailable(&st, p.Generation, allAvailable, storageReady, waiting)
	failed := problem.Failing(problems)
	setProgressing(&st, p.Generation, allAvailable, failed, waiting)
	setPlacementStatus(&st, p, obs.Placements, obs.RouterPlacement)
	setDegraded(&st, p.Generation, problems)
	SetReconciled(&st, p.Generation, cmp.Or(obs.Err, heldStorage(obs)))

	switch {
	case !p.DeletionTimestamp.IsZero():
		st.Phase = pipelinev1.PipelinePhaseDeleting
	case failed:
		st.Phase = pipelinev1.PipelinePhaseFailed
	case allAvailable:
		st.Phase = pipelinev1.PipelinePhaseRunning
	default:
		st.Phase = pipelinev1.PipelinePhaseCreating
	}
	setHealth(&st, p.Generation)
	return st
}

// heldStorage is what Reconciled reports of a pass that held the storage back (nil when it did
// not): the storage problem, since the children do not match the spec.
func heldStorage(obs *Observed) error {
	if !obs.StorageHeld {
		return nil
	}
	for _, pr := range obs.Problems {
		if pr.Reason == pipelinev1.ReasonModelStorageClassNotFound || pr.Reason == pipelinev1.ReasonModelStorageClassNotPermitted {
			return problem.WithReason(pr.Reason, errors.New(pr.Message))
		}
	}
	return problem.WithReason(pipelinev1.ReasonReconcileFailed, errors.New("the model storage the spec asks for could not be made"))
}

// SetStorageAuthorized sets the ModelStorageAuthorized condition of modelStorageClass storage
// from access, and removes it for other storage. Its lastTransitionTime is when the class
// stopped granting the storage: the reconciler counts the revocation grace from it.
func SetStorageAuthorized(st *pipelinev1.PipelineStatus, p *pipelinev1.Pipeline, access *StorageAccess) {
	if access == nil {
		meta.RemoveStatusCondition(&st.Conditions, pipelinev1.ConditionModelStorageAuthorized)
		return
	}
	c := metav1.Condition{Type: pipelinev1.ConditionModelStorageAuthorized, ObservedGeneration: p.Generation,
		Status: metav1.ConditionFalse, Reason: access.Reason, Message: access.Message}
	if access.Authorized {
		c.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// observedGeneration is the generation the pass acted on: p's when it succeeded, or when all
// that stopped it (err) is the apiserver refusing a child for what it is — its verdict (Stalled,
// for a person) is about this spec, and generic tools read it only once observedGeneration
// says so. Otherwise the one before.
func observedGeneration(p *pipelinev1.Pipeline, err error) int64 {
	if err == nil || problem.OnlyReason(err, pipelinev1.ReasonApplyRefused) {
		return p.Generation
	}
	return p.Status.ObservedGeneration
}

// readySteps says how many steps of st are available, as "<ready>/<total>".
func readySteps(st *pipelinev1.PipelineStatus) string {
	return fmt.Sprintf("%d/%d", ptr.Deref(st.ReadySteps, 0), ptr.Deref(st.TotalSteps, 0))
}

func setAvailable(st *pipelinev1.PipelineStatus, gen int64, available, storageReady bool, waiting []string) {
	c := metav1.Condition{Type: pipelinev1.ConditionAvailable, ObservedGeneration: gen}
	switch {
	case available:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, pipelinev1.ReasonAllStepsAvailable, "The model storage is bound and every step is available"
	case !storageReady:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, pipelinev1.ReasonStorageNotBound, problem.JoinMessages(waiting)
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, pipelinev1.ReasonStepsUnavailable, readySteps(st)+" steps available; "+problem.JoinMessages(waiting)
	}
	if !available && len(waiting) == 0 {
		c.Message = readySteps(st) + " steps available"
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func setProgressing(st *pipelinev1.PipelineStatus, gen int64, available, degraded bool, waiting []string) {
	c := metav1.Condition{Type: pipelinev1.ConditionProgressing, ObservedGeneration: gen}
	switch {
	case degraded:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, pipelinev1.ReasonRolloutFailed, "The rollout cannot complete: see the Degraded condition"
	case available:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, pipelinev1.ReasonRolloutComplete, "Every step runs the current spec"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, pipelinev1.ReasonRollingOut, problem.JoinMessages(waiting)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func setDegraded(st *pipelinev1.PipelineStatus, gen int64, problems []problem.Problem) {
	c := metav1.Condition{Type: pipelinev1.ConditionDegraded, ObservedGeneration: gen,
		Status: metav1.ConditionFalse, Reason: pipelinev1.ReasonAsExpected, Message: "No problems found"}
	if len(problems) > 0 {
		msgs := make([]string, 0, len(problems))
		for _, pr := range problems {
			msgs = append(msgs, pr.Message)
		}
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, problems[0].Reason, problem.JoinMessages(msgs)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// SetReconciled sets the Reconciled condition of st from err, the error of the pass (nil: the
// children match the spec).
func SetReconciled(st *pipelinev1.PipelineStatus, gen int64, err error) {
	c := metav1.Condition{Type: pipelinev1.ConditionReconciled, ObservedGeneration: gen,
		Status: metav1.ConditionTrue, Reason: pipelinev1.ReasonReconcileSucceeded, Message: "The children match the spec"}
	if err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, problem.ReasonOf(err), problem.Truncate(err.Error(), 1024)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
