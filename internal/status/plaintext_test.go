package status

import (
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/ndsl-cn/pipeline-operator/internal/status/statustest"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// hostileMessage is what a tenant's image can write to its termination message: a clipboard
// write (OSC 52, ended by BEL), a window title, a screen clear and cursor moves (CSI), a carriage
// return that writes over the line, a CSI as the C1 control U+009B in UTF-8, bytes that are not
// UTF-8, a right-to-left override, DEL, a line separator and a second line.
const hostileMessage = "model not found \x1b]52;c;Y3VybCBldmlsLnNofHNo\a\x1b]0;root@prod\x07 \x1b[2J\x1b[1;1Hhidden over\rwrite " +
	"\u009b31mred \xff\xfe bad \u202egnp.exe\u202c del\x7f sep\u2028end\nsecond line"

// assertPlain fails when s holds a control character (tab included), DEL, a C1 or
// bidirectional control, a line separator or bytes that are not UTF-8.
func assertPlain(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("not UTF-8: %q", s)
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x2028 || r == 0x2029 {
			t.Errorf("holds %U: %q", r, s)
			return
		}
	}
}

func TestPlainText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain, ünïcödé 模型 ✓", "plain, ünïcödé 模型 ✓"},
		{"\x1b]52;c;aGk=\a rest", "]52;c;aGk= rest"},
		{"\x1b[2J\x1b[Hclear", "[2J[Hclear"},
		{"over\rwrite\tand\nnext", "over write and next"},
		{"\u009b31mred\u0085", "31mred"},
		{"bad \xff\xfe utf-8", "bad \uFFFD utf-8"},
		{"\u202egnp.exe\u2066x\u2069", "gnp.exex"},
		{"line\u2028sep", "line sep"},
		{"nul\x00 del\x7f", "nul del"},
		{"", ""},
	} {
		if got := plainText(tc.in); got != tc.want {
			t.Errorf("plainText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	assertPlain(t, plainText(hostileMessage))
}

// A termination message, and why a container waits, reach the step's status, and the Degraded
// condition through it, without their control characters, on one line, the rest of their text
// kept and bounded as before.
func TestTerminationMessagePlainText(t *testing.T) {
	pod := runningPod("p", false, false)
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason: "CrashLoopBackOff", Message: "back-off \x1b[31m40s\x1b[0m"}}
	pod.Status.ContainerStatuses[0].RestartCount = 3
	pod.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1,
		Reason: "Error\x1b]0;x\a", Message: hostileMessage}
	s := computeStepReadiness(testenv.Sample(t, "edge"), 0, startingDeployment(), statustest.ReadyService(), "", []corev1.Pod{pod}, false)
	assertPlain(t, s.status.Message)
	assertPlain(t, s.failure)
	for _, want := range []string{
		"CrashLoopBackOff: back-off [31m40s[0m; its last run ended with exit code 1 (Error]0;x) after 3 restarts: model not found ]52;c;Y3VybCBldmlsLnNofHNo]0;root@prod [2J[1;1Hhidden over write",
		"31mred \uFFFD bad gnp.exe del sep end; second line",
	} {
		if !strings.Contains(s.status.Message, want) {
			t.Errorf("message %q lacks %q", s.status.Message, want)
		}
	}

	// The router's pods are read the same way.
	if _, msg, ok := podFailure([]corev1.Pod{pod}); !ok {
		t.Error("the crash loop is not a failure")
	} else {
		assertPlain(t, msg)
	}

	// A long message of control characters and invalid bytes stays within its bound.
	pod.Status.ContainerStatuses[0].LastTerminationState.Terminated.Message = strings.Repeat("\xff\x1b", 4096)
	_, msg, _ := podFailure([]corev1.Pod{pod})
	assertPlain(t, msg)
	if quoted := msg[strings.LastIndex(msg, ": ")+2:]; len(quoted) > maxTerminationMessage || !strings.HasSuffix(quoted, "...") {
		t.Errorf("quoted %d bytes of the termination message, want at most %d ending in ...", len(quoted), maxTerminationMessage)
	}

	// Why a running pod is not ready, and why it cannot be scheduled.
	loading := runningPod("p-load", false, true)
	loading.Status.Conditions[1].Message = "not ready: " + hostileMessage
	s = computeStepReadiness(testenv.Sample(t, "edge"), 0, startingDeployment(), statustest.ReadyService(), "", []corev1.Pod{loading}, false)
	assertPlain(t, s.status.Message)
	assertPlain(t, s.waiting)
	unschedulable := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: hostileMessage}}}}
	_, why, _ := unschedulablePod([]corev1.Pod{unschedulable})
	assertPlain(t, why)
}
