package status

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
)

// Reasons of a step's state (status.steps[].reason) besides the reasons of its failing
// containers, which it carries as they are (waiting: CrashLoopBackOff, ImagePullBackOff, ...;
// ended in a crash loop: Error, OOMKilled, ...; see podFailure).
const (
	reasonPodsReady        = "PodsReady"
	reasonModelLoading     = "ModelLoading"
	reasonStorageWithdrawn = "ModelStorageWithdrawn"
	reasonScaledToZero     = "ScaledToZero"
	reasonNoDeployment     = "DeploymentNotFound"
	reasonRollingOut       = "RollingOut"
	reasonUnschedulable    = "Unschedulable"
)

// maxTerminationMessage is the most of a container's termination message (what the program
// wrote to its terminationMessagePath, e.g. why the router refused its configuration) a
// message quotes.
const maxTerminationMessage = 1024

// failingWaits are the waiting reasons of a container that does not get better by itself.
var failingWaits = []string{"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}

// NeedsPods reports whether the state of a step whose Deployment is d can only be told from its
// pods: some run, or are meant to, and not every one the step asks for is available. The
// reconciler then lists them (status.steps[].state tells Loading from Pending, and a crash
// loop from a slow start).
func NeedsPods(d *appsv1.Deployment) bool {
	if d == nil || ptr.Deref(d.Spec.Replicas, 1) == 0 || d.Status.Replicas == 0 {
		return false
	}
	return d.Status.AvailableReplicas < ptr.Deref(d.Spec.Replicas, 1) || d.Status.UpdatedReplicas < d.Status.Replicas
}

// readiness is the state of a step: from ds and detail, the state of its Deployment d and what
// classify says of it, and the step's pods (nil: not looked at). withdrawn says its model storage
// was. A Loading step's loading pod is in detail, its time (see loadingPod) in since.
func readiness(d *appsv1.Deployment, ds pipelinev1.DeploymentState, detail string, pods []corev1.Pod, withdrawn bool) (
	state pipelinev1.StepState, reason, message string, since *metav1.Time) {
	if d == nil {
		return pipelinev1.StepStatePending, reasonNoDeployment, "its Deployment does not exist yet", nil
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	switch {
	case withdrawn:
		return pipelinev1.StepStateStopped, reasonStorageWithdrawn, "scaled to zero while its model storage is withdrawn", nil
	case want == 0:
		return pipelinev1.StepStateStopped, reasonScaledToZero, "its Deployment asks for no pods", nil
	case ds == pipelinev1.DeploymentStateFailed:
		reason, _, _ := deploymentFailure(d)
		return pipelinev1.StepStateFailed, reason, detail, nil
	}
	if reason, msg, ok := podFailure(pods); ok {
		return pipelinev1.StepStateFailed, reason, msg, nil
	}
	if ds == pipelinev1.DeploymentStateAvailable {
		return pipelinev1.StepStateReady, reasonPodsReady, fmt.Sprintf("%d of %d pods ready", d.Status.ReadyReplicas, want), nil
	}
	ready := fmt.Sprintf("%d of %d pods ready", d.Status.ReadyReplicas, want)
	if name, why, started, ok := loadingPod(pods); ok {
		msg := fmt.Sprintf("%s; pod %s runs but is not ready: %s", ready, name, why)
		if started == nil {
			return pipelinev1.StepStateLoading, reasonModelLoading, msg, nil
		}
		return pipelinev1.StepStateLoading, reasonModelLoading, msg + "; loading since " + started.UTC().Format(time.RFC3339), started
	}
	if name, why, ok := unschedulablePod(pods); ok {
		return pipelinev1.StepStatePending, reasonUnschedulable, fmt.Sprintf("%s; pod %s cannot be scheduled: %s", ready, name, why), nil
	}
	return pipelinev1.StepStatePending, reasonRollingOut, ready + "; " + detail, nil
}

// podFailure finds, in pods, a container that fails in a way that does not pass by itself: it
// waits for such a reason (a crash loop, an image that cannot be pulled), or it ended with an
// error once more after it was restarted (a crash loop before its back-off shows). It returns the
// container's reason and a message naming the pod, the container and how its last run ended,
// quoting the container's termination message.
func podFailure(pods []corev1.Pod) (string, string, bool) {
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		for _, c := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			if reason, msg, ok := containerFailure(&c); ok {
				return reason, fmt.Sprintf("pod %s, container %s: %s", p.Name, c.Name, msg), true
			}
		}
	}
	return "", "", false
}

// containerFailure says whether container c fails (see podFailure): its reason, and what it
// waits for and how its last run ended. The text of c's state is taken as plainText.
func containerFailure(c *corev1.ContainerStatus) (string, string, bool) {
	if w := c.State.Waiting; w != nil && slices.Contains(failingWaits, w.Reason) {
		msg := w.Reason
		if w.Message != "" {
			msg += ": " + plainText(w.Message)
		}
		if t := c.LastTerminationState.Terminated; t != nil {
			msg += "; its last run ended " + runEnd(t, c.RestartCount)
		}
		return w.Reason, msg, true
	}
	if t := c.State.Terminated; t != nil && t.ExitCode != 0 && c.RestartCount > 0 {
		return cmp.Or(plainText(t.Reason), "Error"), "its last run ended " + runEnd(t, c.RestartCount), true
	}
	return "", "", false
}

// runEnd says how a run of a container restarted restarts times ended, t: its exit code and
// reason, and its termination message on one line, as plainText, bounded (maxTerminationMessage).
func runEnd(t *corev1.ContainerStateTerminated, restarts int32) string {
	s := fmt.Sprintf("with exit code %d (%s) after %d restarts", t.ExitCode, cmp.Or(plainText(t.Reason), "no reason"), restarts)
	var lines []string
	for l := range strings.Lines(t.Message) {
		if l = strings.TrimSpace(plainText(l)); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > 0 {
		s += ": " + problem.Truncate(strings.Join(lines, "; "), maxTerminationMessage)
	}
	return s
}

// loadingPod finds, in pods, one that runs but is not ready: its name, what its Ready condition
// says, and since when it loads (loadingStart).
func loadingPod(pods []corev1.Pod) (string, string, *metav1.Time, bool) {
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() || p.Status.Phase != corev1.PodRunning {
			continue
		}
		if c := podCondition(p, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
			why := "the readiness of its containers is not reported yet"
			if c != nil && c.Message != "" {
				why = plainText(c.Message)
			}
			if notStarted := notStartedContainers(p); len(notStarted) > 0 {
				why = "startup probe of " + strings.Join(notStarted, ", ") + " not passed yet"
			}
			return p.Name, why, loadingStart(p), true
		}
	}
	return "", "", nil, false
}

// loadingStart is when the last of p's running containers that are not ready started: the
// model server that loads (a restarted one loads again from its start). Nil when the kubelet
// reports no such start.
func loadingStart(p *corev1.Pod) *metav1.Time {
	var latest *metav1.Time
	for _, c := range p.Status.ContainerStatuses {
		if r := c.State.Running; r != nil && !c.Ready && !r.StartedAt.IsZero() && (latest == nil || latest.Before(&r.StartedAt)) {
			latest = r.StartedAt.DeepCopy()
		}
	}
	return latest
}

// unschedulablePod finds, in pods, one the scheduler cannot place: its name and why.
func unschedulablePod(pods []corev1.Pod) (string, string, bool) {
	for i := range pods {
		p := &pods[i]
		if c := podCondition(p, corev1.PodScheduled); p.DeletionTimestamp.IsZero() && c != nil && c.Status == corev1.ConditionFalse {
			return p.Name, plainText(cmp.Or(c.Message, c.Reason)), true
		}
	}
	return "", "", false
}

// notStartedContainers are the containers of p that run but whose startup probe has not passed.
func notStartedContainers(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running != nil && !ptr.Deref(c.Started, true) {
			out = append(out, c.Name)
		}
	}
	return out
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// maxStepReason is the longest status.steps[].reason (the schema's bound); its message is
// bounded as a condition's (problem.MaxMessageLength).
const maxStepReason = 128
