package status

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/status/statustest"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// startingDeployment is a Deployment of two pods, both created and updated, none ready.
func startingDeployment() *appsv1.Deployment {
	d := statustest.AvailableDeployment(2)
	d.Status.ReadyReplicas, d.Status.AvailableReplicas = 0, 0
	return d
}

// runningPod is a pod whose one container runs; ready says whether it passed its readiness probe,
// started whether its startup probe.
func runningPod(name string, ready, started bool) corev1.Pod {
	readyStatus := corev1.ConditionFalse
	msg := "containers with unready status: [server]"
	if ready {
		readyStatus, msg = corev1.ConditionTrue, ""
	}
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: readyStatus, Message: msg}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "server", Ready: ready, Started: ptr.To(started),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
	}}
}

func TestStepReadiness(t *testing.T) {
	crashing := runningPod("p-crash", false, false)
	crashing.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}}
	crashing.Status.ContainerStatuses[0].RestartCount = 3
	crashing.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}
	pulling := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-pull"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "server", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}}}
	unschedulable := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-unsched"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}}}
	refusing := crashing.DeepCopy()
	refusing.Name = "p-refuse"
	refusing.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
		Message: "  the tensor mappings do not fit the models:\ninput \"x\" of step 2 (classify): no output \"y\"\n\n"}
	ended := runningPod("p-ended", false, false)
	ended.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error", Message: "model repository /models/triton not found"}}
	ended.Status.ContainerStatuses[0].RestartCount = 2
	endedOnce := ended.DeepCopy()
	endedOnce.Status.ContainerStatuses[0].RestartCount = 0
	initDone := runningPod("p-init", false, false)
	initDone.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "fetch", RestartCount: 1,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	deadline := startingDeployment()
	deadline.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "d-1" has timed out progressing.`}}

	tests := []struct {
		name      string
		d         *appsv1.Deployment
		pods      []corev1.Pod
		withdrawn bool
		state     pipelinev1.StepState
		reason    string
		message   string
		failure   bool // the step is a problem of the Pipeline (Degraded)
		waiting   bool // the Pipeline waits for it
	}{
		{name: "no deployment", state: pipelinev1.StepStatePending, reason: "DeploymentNotFound", waiting: true},
		{name: "every pod ready", d: statustest.AvailableDeployment(2), state: pipelinev1.StepStateReady, reason: "PodsReady", message: "2 of 2 pods ready"},
		{name: "pods run, startup probe pending", d: startingDeployment(), pods: []corev1.Pod{runningPod("p-a", false, false)},
			state: pipelinev1.StepStateLoading, reason: "ModelLoading", message: "pod p-a runs but is not ready: startup probe of server not passed yet", waiting: true},
		{name: "pods run, readiness probe failing", d: startingDeployment(), pods: []corev1.Pod{runningPod("p-a", true, true), runningPod("p-b", false, true)},
			state: pipelinev1.StepStateLoading, reason: "ModelLoading", message: "pod p-b runs but is not ready: containers with unready status: [server]", waiting: true},
		{name: "crash loop", d: startingDeployment(), pods: []corev1.Pod{runningPod("p-a", false, false), crashing},
			state: pipelinev1.StepStateFailed, reason: "CrashLoopBackOff",
			message: "pod p-crash, container server: CrashLoopBackOff: back-off 40s restarting failed container; its last run ended with exit code 137 (Error) after 3 restarts",
			failure: true},
		{name: "crash loop quoting the termination message on one line", d: startingDeployment(), pods: []corev1.Pod{*refusing},
			state: pipelinev1.StepStateFailed, reason: "CrashLoopBackOff",
			message: "its last run ended with exit code 1 (Error) after 3 restarts: " +
				`the tensor mappings do not fit the models:; input "x" of step 2 (classify): no output "y"`,
			failure: true},
		{name: "ended with an error again after a restart", d: startingDeployment(), pods: []corev1.Pod{ended},
			state: pipelinev1.StepStateFailed, reason: "Error",
			message: "pod p-ended, container server: its last run ended with exit code 1 (Error) after 2 restarts: " +
				"model repository /models/triton not found",
			failure: true},
		{name: "ended with an error the first time: it is restarted", d: startingDeployment(), pods: []corev1.Pod{*endedOnce},
			state: pipelinev1.StepStateLoading, reason: "ModelLoading", message: "pod p-ended runs but is not ready", waiting: true},
		{name: "an init container that completed", d: startingDeployment(), pods: []corev1.Pod{initDone},
			state: pipelinev1.StepStateLoading, reason: "ModelLoading", message: "pod p-init runs but is not ready", waiting: true},
		{name: "image cannot be pulled", d: startingDeployment(), pods: []corev1.Pod{pulling},
			state: pipelinev1.StepStateFailed, reason: "ImagePullBackOff", message: "pod p-pull, container server: ImagePullBackOff", failure: true},
		{name: "unschedulable", d: startingDeployment(), pods: []corev1.Pod{unschedulable},
			state: pipelinev1.StepStatePending, reason: "Unschedulable", message: "Insufficient nvidia.com/gpu", waiting: true},
		{name: "progress deadline exceeded", d: deadline, state: pipelinev1.StepStateFailed, reason: "ProgressDeadlineExceeded", message: "timed out progressing", failure: true},
		{name: "pods not looked at", d: startingDeployment(), state: pipelinev1.StepStatePending, reason: "RollingOut", message: "0 of 2 pods ready", waiting: true},
		{name: "storage withdrawn", d: statustest.AvailableDeployment(0), withdrawn: true,
			state: pipelinev1.StepStateStopped, reason: "ModelStorageWithdrawn", message: "scaled to zero", waiting: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "edge")
			s := computeStepReadiness(p, 0, tt.d, statustest.ReadyService(), "", tt.pods, tt.withdrawn)
			if s.status.State != tt.state || s.status.Reason != tt.reason || !strings.Contains(s.status.Message, tt.message) {
				t.Errorf("state %s, reason %s, message %q; want %s, %s, containing %q", s.status.State, s.status.Reason, s.status.Message,
					tt.state, tt.reason, tt.message)
			}
			if (s.failure != "") != tt.failure || (s.waiting != "") != tt.waiting {
				t.Errorf("failure %q, waiting %q; want failure %t, waiting %t", s.failure, s.waiting, tt.failure, tt.waiting)
			}
		})
	}
}

// A message longer than the schema allows is cut, on a rune boundary.
func TestStepMessageBounded(t *testing.T) {
	pod := runningPod("p", false, true)
	pod.Status.Conditions[1].Message = strings.Repeat("é", 2000)
	s := computeStepReadiness(testenv.Sample(t, "edge"), 0, startingDeployment(), statustest.ReadyService(), "", []corev1.Pod{pod}, false)
	if n := len(s.status.Message); n > problem.MaxMessageLength || !strings.HasSuffix(s.status.Message, "...") {
		t.Errorf("message of %d bytes, want at most %d ending in ...", n, problem.MaxMessageLength)
	}
	if !utf8Valid(s.status.Message) {
		t.Error("message cut inside a rune")
	}
}

// A termination message is quoted at most maxTerminationMessage long: the pod and container
// stay named in front of it.
func TestTerminationMessageBounded(t *testing.T) {
	pod := runningPod("p", false, false)
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	pod.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1,
		Message: strings.Repeat("x", 4096)}
	_, msg, ok := podFailure([]corev1.Pod{pod})
	if !ok || !strings.HasPrefix(msg, "pod p, container server: CrashLoopBackOff; its last run ended with exit code 1 (no reason)") {
		t.Fatalf("failure %t, message %q", ok, msg)
	}
	if quoted := msg[strings.LastIndex(msg, ": ")+2:]; len(quoted) > maxTerminationMessage || !strings.HasSuffix(quoted, "...") {
		t.Errorf("quoted %d bytes of the termination message, want at most %d ending in ...", len(quoted), maxTerminationMessage)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// A Loading step says since when its model loads: the start of its model server's container, the
// later of two (one restarted), in the message and in loadingSince; a step in another state has
// no loadingSince.
func TestLoadingSince(t *testing.T) {
	first := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	restarted := metav1.NewTime(first.Add(90 * time.Second))
	pod := runningPod("p-a", false, false)
	pod.Status.ContainerStatuses[0].State.Running.StartedAt = first
	sidecar := pod.Status.ContainerStatuses[0]
	sidecar.Name, sidecar.State.Running = "sidecar", &corev1.ContainerStateRunning{StartedAt: restarted}
	pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, sidecar)
	p := testenv.Sample(t, "edge")
	s := computeStepReadiness(p, 0, startingDeployment(), statustest.ReadyService(), "", []corev1.Pod{pod}, false)
	if s.status.State != pipelinev1.StepStateLoading || s.status.LoadingSince == nil || !s.status.LoadingSince.Equal(&restarted) ||
		!strings.HasSuffix(s.status.Message, "; loading since 2026-12-01T10:01:30Z") {
		t.Errorf("state %s, loadingSince %v, message %q; want Loading since %s", s.status.State, s.status.LoadingSince, s.status.Message, restarted)
	}
	pod.Status.ContainerStatuses[1].Ready = true
	if s = computeStepReadiness(p, 0, startingDeployment(), statustest.ReadyService(), "", []corev1.Pod{pod}, false); s.status.LoadingSince == nil ||
		!s.status.LoadingSince.Equal(&first) {
		t.Errorf("loadingSince %v, want %s: a ready container loads nothing", s.status.LoadingSince, first)
	}
	if s = computeStepReadiness(p, 0, statustest.AvailableDeployment(2), statustest.ReadyService(), "", nil, false); s.status.LoadingSince != nil {
		t.Errorf("a Ready step has loadingSince %v", s.status.LoadingSince)
	}
}
