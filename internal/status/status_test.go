package status

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/status/statustest"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// convergedWorld is what a healthy two-step nfs Pipeline looks like.
func convergedWorld() *Observed {
	return &Observed{
		PV:          statustest.BoundPV(),
		PVC:         statustest.BoundPVC(),
		Deployments: []*appsv1.Deployment{statustest.AvailableDeployment(1), statustest.AvailableDeployment(1)},
		Services:    []*corev1.Service{statustest.ReadyService(), statustest.ReadyService()},
	}
}

func TestComputeStatus(t *testing.T) {
	tests := []struct {
		name        string
		world       func(o *Observed)
		deleting    bool
		phase       pipelinev1.PipelinePhase
		ready       int32 // readySteps; totalSteps is always 2
		available   metav1.ConditionStatus
		degraded    string // reason when Degraded is True, "" when False
		progressing metav1.ConditionStatus
		message     string // part of the Available or Degraded message
	}{{
		name: "everything missing", world: func(o *Observed) {
			*o = Observed{Deployments: make([]*appsv1.Deployment, 2), Services: make([]*corev1.Service, 2)}
		},
		phase: pipelinev1.PipelinePhaseCreating, ready: 0, available: metav1.ConditionFalse, progressing: metav1.ConditionTrue,
		message: "PersistentVolume",
	}, {
		name: "converged", world: func(*Observed) {},
		phase: pipelinev1.PipelinePhaseRunning, ready: 2, available: metav1.ConditionTrue, progressing: metav1.ConditionFalse,
	}, {
		name: "claim pending", world: func(o *Observed) { o.PVC.Status.Phase = corev1.ClaimPending },
		phase: pipelinev1.PipelinePhaseCreating, ready: 2, available: metav1.ConditionFalse, progressing: metav1.ConditionTrue,
		message: "is Pending",
	}, {
		name: "step rolling out", world: func(o *Observed) { o.Deployments[1].Status.UpdatedReplicas = 0 },
		phase: pipelinev1.PipelinePhaseCreating, ready: 1, available: metav1.ConditionFalse, progressing: metav1.ConditionTrue,
		message: "step 2 (step-2): Deployment d is rolling out: 0 of 1 pods updated",
	}, {
		name: "rollout not yet observed", world: func(o *Observed) { o.Deployments[0].Generation = 3 },
		phase: pipelinev1.PipelinePhaseCreating, ready: 1, available: metav1.ConditionFalse, progressing: metav1.ConditionTrue,
		message: "has a rollout that has not started yet",
	}, {
		name: "old pods still terminating", world: func(o *Observed) { o.Deployments[0].Status.Replicas = 2 },
		phase: pipelinev1.PipelinePhaseCreating, ready: 1, available: metav1.ConditionFalse, progressing: metav1.ConditionTrue,
	}, {
		name: "service without cluster IP", world: func(o *Observed) { o.Services[0].Spec.ClusterIP = "" },
		phase: pipelinev1.PipelinePhaseCreating, ready: 1, available: metav1.ConditionFalse, progressing: metav1.ConditionTrue,
		message: "has no cluster IP",
	}, {
		name: "progress deadline exceeded",
		world: func(o *Observed) {
			o.Deployments[1].Status.AvailableReplicas = 0
			o.Deployments[1].Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing,
				Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "d-1" has timed out progressing.`}}
		},
		phase: pipelinev1.PipelinePhaseFailed, ready: 1, available: metav1.ConditionFalse, progressing: metav1.ConditionFalse,
		degraded: pipelinev1.ReasonStepFailed, message: "step 2 (step-2): Deployment d exceeded its progress deadline",
	}, {
		name: "replica failure",
		world: func(o *Observed) {
			o.Deployments[0].Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentReplicaFailure,
				Status: corev1.ConditionTrue, Message: "exceeded quota"}}
		},
		phase: pipelinev1.PipelinePhaseFailed, ready: 1, available: metav1.ConditionFalse, progressing: metav1.ConditionFalse,
		degraded: pipelinev1.ReasonStepFailed, message: "cannot create pods: exceeded quota",
	}, {
		name: "volume failed", world: func(o *Observed) { o.PV.Status.Phase = corev1.VolumeFailed; o.PV.Status.Message = "recycler failed" },
		phase: pipelinev1.PipelinePhaseFailed, ready: 2, available: metav1.ConditionTrue, progressing: metav1.ConditionFalse,
		degraded: pipelinev1.ReasonStorageFailed, message: "recycler failed",
	}, {
		name: "claim lost", world: func(o *Observed) { o.PVC.Status.Phase = corev1.ClaimLost },
		phase: pipelinev1.PipelinePhaseFailed, ready: 2, available: metav1.ConditionFalse, progressing: metav1.ConditionFalse,
		degraded: pipelinev1.ReasonStorageFailed, message: "lost its volume",
	}, {
		name: "missing node",
		world: func(o *Observed) {
			o.Problems = []problem.Problem{{Reason: pipelinev1.ReasonNodeNotFound, Message: "step 2 (step-2): node xx does not exist"}}
			o.Deployments[1].Status.AvailableReplicas = 0
		},
		phase: pipelinev1.PipelinePhaseFailed, ready: 1, available: metav1.ConditionFalse, progressing: metav1.ConditionFalse,
		degraded: pipelinev1.ReasonNodeNotFound, message: "node xx does not exist",
	}, {
		name: "cordoned node: degraded, still running",
		world: func(o *Observed) {
			o.Problems = []problem.Problem{{Reason: pipelinev1.ReasonNodeNotReady, Message: "step 2 (step-2): node xx is ready but cordoned", Notice: true}}
		},
		phase: pipelinev1.PipelinePhaseRunning, ready: 2, available: metav1.ConditionTrue, progressing: metav1.ConditionFalse,
		degraded: pipelinev1.ReasonNodeNotReady, message: "is ready but cordoned",
	}, {
		name: "cordoned node while rolling out: the rollout goes on",
		world: func(o *Observed) {
			o.Problems = []problem.Problem{{Reason: pipelinev1.ReasonNodeNotReady, Message: "step 2 (step-2): node xx is ready but cordoned", Notice: true}}
			o.Deployments[0].Status.UpdatedReplicas = 0
		},
		phase: pipelinev1.PipelinePhaseCreating, ready: 1, available: metav1.ConditionFalse, progressing: metav1.ConditionTrue,
		degraded: pipelinev1.ReasonNodeNotReady, message: "is ready but cordoned",
	}, {
		name: "not ready node and a cordoned one: failed",
		world: func(o *Observed) {
			o.Problems = []problem.Problem{
				{Reason: pipelinev1.ReasonNodeNotReady, Message: "step 1 (step-1): node xx is ready but cordoned", Notice: true},
				{Reason: pipelinev1.ReasonNodeNotReady, Message: "step 2 (step-2): node yy is not ready"},
			}
		},
		phase: pipelinev1.PipelinePhaseFailed, ready: 2, available: metav1.ConditionTrue, progressing: metav1.ConditionFalse,
		degraded: pipelinev1.ReasonNodeNotReady, message: "node yy is not ready",
	}, {
		name: "deleting", world: func(*Observed) {}, deleting: true,
		phase: pipelinev1.PipelinePhaseDeleting, ready: 2, available: metav1.ConditionTrue, progressing: metav1.ConditionFalse,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "default")
			p.Generation = 4
			if tt.deleting {
				p.DeletionTimestamp = ptr.To(metav1.Now())
			}
			o := convergedWorld()
			tt.world(o)
			st := Compute(p, o)

			if st.Phase != tt.phase {
				t.Errorf("phase %q, want %q", st.Phase, tt.phase)
			}
			if !reflect.DeepEqual(st.ReadySteps, ptr.To(tt.ready)) || !reflect.DeepEqual(st.TotalSteps, ptr.To[int32](2)) {
				t.Errorf("readySteps %v, totalSteps %v; want %d, 2", ptr.Deref(st.ReadySteps, -1), ptr.Deref(st.TotalSteps, -1), tt.ready)
			}
			if want := fmt.Sprintf("%d/2", tt.ready); st.Ready != want || st.ModelNames != "facedetection-1, facedetection-2" {
				t.Errorf("ready %q, modelNames %q: the printer columns; want %q and the models", st.Ready, st.ModelNames, want)
			}
			if st.ObservedGeneration != 4 {
				t.Errorf("observedGeneration %d", st.ObservedGeneration)
			}
			if len(st.Steps) != 2 {
				t.Fatalf("steps %+v", st.Steps)
			}
			avail := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionAvailable)
			prog := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionProgressing)
			deg := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionDegraded)
			if avail.Status != tt.available {
				t.Errorf("Available %s (%s: %s), want %s", avail.Status, avail.Reason, avail.Message, tt.available)
			}
			if prog.Status != tt.progressing {
				t.Errorf("Progressing %s (%s), want %s", prog.Status, prog.Reason, tt.progressing)
			}
			if failed := tt.phase == pipelinev1.PipelinePhaseFailed; failed != (prog.Reason == pipelinev1.ReasonRolloutFailed) {
				t.Errorf("Progressing reason %s with phase %s", prog.Reason, st.Phase)
			}
			if tt.degraded == "" && deg.Status != metav1.ConditionFalse {
				t.Errorf("Degraded %s: %s", deg.Reason, deg.Message)
			}
			if tt.degraded != "" && (deg.Status != metav1.ConditionTrue || deg.Reason != tt.degraded) {
				t.Errorf("Degraded %s %s, want True %s", deg.Status, deg.Reason, tt.degraded)
			}
			if tt.message != "" && !strings.Contains(avail.Message+deg.Message, tt.message) {
				t.Errorf("no condition says %q: Available %q, Degraded %q", tt.message, avail.Message, deg.Message)
			}
			for _, c := range st.Conditions {
				if c.ObservedGeneration != 4 || c.Reason == "" || c.Message == "" {
					t.Errorf("condition %+v is incomplete", c)
				}
			}
		})
	}
}

// The state of every step, with its replica counts written even when 0, the storage and the
// models.
func TestComputeStatusSteps(t *testing.T) {
	p := testenv.Sample(t, "edge")
	o := convergedWorld()
	o.Deployments[1] = nil
	o.Services[1] = nil
	st := Compute(p, o)
	want := []pipelinev1.StepStatus{{
		Name: "step-1", DeploymentName: "facedetection-pipeline-step-1", URL: "http://facedetection-pipeline-step-1.edge.svc.cluster.local.:9080",
		Replicas: ptr.To[int32](1), ReadyReplicas: ptr.To[int32](1),
		DeploymentState: pipelinev1.DeploymentStateAvailable, ServiceState: pipelinev1.ServiceStateReady,
		State: pipelinev1.StepStateReady, Reason: "PodsReady", Message: "1 of 1 pods ready",
	}, {
		Name: "step-2", DeploymentName: "facedetection-pipeline-step-2", URL: "http://facedetection-pipeline-step-2.edge.svc.cluster.local.:80",
		Replicas: ptr.To[int32](1), ReadyReplicas: ptr.To[int32](0),
		DeploymentState: pipelinev1.DeploymentStatePending, ServiceState: pipelinev1.ServiceStatePending,
		State: pipelinev1.StepStatePending, Reason: "DeploymentNotFound", Message: "its Deployment does not exist yet",
	}}
	if diff := gocmp.Diff(want, st.Steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	wantStorage := pipelinev1.StorageStatus{VolumeName: resources.PVName(p), VolumeState: corev1.VolumeBound,
		ClaimName: resources.ClaimName(p), ClaimState: corev1.ClaimBound}
	if st.Storage != wantStorage {
		t.Errorf("storage %+v, want %+v", st.Storage, wantStorage)
	}
	if !slices.Equal(st.Models, []string{"facedetection-1", "facedetection-2"}) {
		t.Errorf("models %q", st.Models)
	}
	if !reflect.DeepEqual(st.ReadySteps, ptr.To[int32](1)) || !reflect.DeepEqual(st.TotalSteps, ptr.To[int32](2)) {
		t.Errorf("readySteps %v, totalSteps %v; want 1, 2", ptr.Deref(st.ReadySteps, -1), ptr.Deref(st.TotalSteps, -1))
	}
}

// The URL of each step names its Service in the cluster's DNS domain, the one the manager is
// given, as NEXT_STEP_URL does.
func TestComputeStatusStepURLsInTheClusterDomain(t *testing.T) {
	p := testenv.Sample(t, "edge")
	o := convergedWorld()
	o.ClusterDomain = "k8s.corp.example"
	st := Compute(p, o)
	for i, want := range []string{
		"http://facedetection-pipeline-step-1.edge.svc.k8s.corp.example.:9080",
		"http://facedetection-pipeline-step-2.edge.svc.k8s.corp.example.:80",
	} {
		if got := st.Steps[i].URL; got != want || got != resources.StepURL(p, i, o.ClusterDomain) {
			t.Errorf("step %d: url %q, want %q", i+1, got, want)
		}
	}
}

// A Pipeline without steps (the apiserver refuses one, an old object may hold one) lists no
// models and counts 0 of 0 steps.
func TestComputeStatusWithoutSteps(t *testing.T) {
	p := testenv.Sample(t, "edge")
	p.Spec.Steps = nil
	st := Compute(p, &Observed{PV: statustest.BoundPV(), PVC: statustest.BoundPVC()})
	if st.Models != nil || len(st.Steps) != 0 {
		t.Errorf("models %q, steps %+v; want none", st.Models, st.Steps)
	}
	if !reflect.DeepEqual(st.ReadySteps, ptr.To[int32](0)) || !reflect.DeepEqual(st.TotalSteps, ptr.To[int32](0)) {
		t.Errorf("readySteps %v, totalSteps %v; want 0, 0", st.ReadySteps, st.TotalSteps)
	}
}

func TestComputeStatusNamesTheVolumeThePassWants(t *testing.T) {
	p := testenv.Sample(t, "edge")
	for _, tt := range []struct{ observed, want string }{
		{"", resources.PVName(p)},
		{"edge-facedetection-pipeline-1a2b3c4d", "edge-facedetection-pipeline-1a2b3c4d"},
	} {
		o := convergedWorld()
		o.PVName = tt.observed
		if got := Compute(p, o).Storage.VolumeName; got != tt.want {
			t.Errorf("observed volume name %q: status.storage.volumeName %q, want %q", tt.observed, got, tt.want)
		}
	}
}

func TestComputeStatusKeepsTransitionTimesAndGenerationOnError(t *testing.T) {
	p := testenv.Sample(t, "default")
	p.Generation = 1
	first := Compute(p, convergedWorld())
	past := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	for i := range first.Conditions {
		first.Conditions[i].LastTransitionTime = past
	}
	p.Status = first
	p.Generation = 2

	o := convergedWorld()
	o.Err = problem.WithReason(pipelinev1.ReasonApplyFailed, errors.New("apply Deployment x: conflict"))
	st := Compute(p, o)
	if st.ObservedGeneration != 1 {
		t.Errorf("a failed pass moved observedGeneration to %d", st.ObservedGeneration)
	}
	rec := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionReconciled)
	if rec.Status != metav1.ConditionFalse || rec.Reason != pipelinev1.ReasonApplyFailed || !strings.Contains(rec.Message, "conflict") {
		t.Errorf("Reconciled %+v", rec)
	}
	avail := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionAvailable)
	if !avail.LastTransitionTime.Equal(&past) {
		t.Errorf("Available moved its transition time without a transition")
	}
	if !rec.LastTransitionTime.After(past.Time) {
		t.Errorf("Reconciled kept its transition time across a transition")
	}
}

// A pass that could not make the storage a ModelStorageClass should provide reports why, fails
// the Pipeline, and says in Reconciled that the children do not match the spec.
func TestComputeStatusWithStorageHeld(t *testing.T) {
	p := testenv.Sample(t, "team-a")
	p.Generation, p.Status.ObservedGeneration = 3, 2
	p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
		ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: "shared"}}
	o := convergedWorld()
	o.StorageHeld = true
	o.Problems = []problem.Problem{{Reason: pipelinev1.ReasonModelStorageClassNotPermitted,
		Message: "ModelStorageClass shared may not be used in namespace team-a"}}
	st := Compute(p, o)
	deg := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionDegraded)
	if st.Phase != pipelinev1.PipelinePhaseFailed || deg == nil || deg.Status != metav1.ConditionTrue ||
		deg.Reason != pipelinev1.ReasonModelStorageClassNotPermitted {
		t.Errorf("phase %s, Degraded %+v", st.Phase, deg)
	}
	if st.ObservedGeneration != 3 {
		t.Errorf("observedGeneration %d, want 3: the verdict is about generation 3", st.ObservedGeneration)
	}
	if rec := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionReconciled); rec == nil || rec.Status != metav1.ConditionFalse ||
		rec.Reason != pipelinev1.ReasonModelStorageClassNotPermitted {
		t.Errorf("Reconciled %+v, want False for the held storage: the children do not match the spec", rec)
	}
	if st.Storage.VolumeName != resources.PVName(p) {
		t.Errorf("storage.volumeName %q, want %q", st.Storage.VolumeName, resources.PVName(p))
	}
}
