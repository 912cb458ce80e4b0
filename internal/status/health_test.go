package status

import (
	"errors"
	"fmt"
	"os"
	"testing"

	lua "github.com/yuin/gopher-lua"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// Generic tools read a Pipeline's health from its conditions: kstatus (what Flux and kpt use),
// `kubectl wait --for=condition=Ready`, and Argo CD through the health check in docs/health.
func TestHealthAsGenericToolsReadIt(t *testing.T) {
	script, err := os.ReadFile(testenv.RepoPath("docs", "health", "argocd-health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		world   func(o *Observed)
		stale   bool // the spec changed since the pass
		phase   pipelinev1.PipelinePhase
		ready   metav1.ConditionStatus
		kstatus kstatus.Status
		argocd  string
	}{{
		name: "running", world: func(*Observed) {},
		phase: pipelinev1.PipelinePhaseRunning, ready: metav1.ConditionTrue, kstatus: kstatus.CurrentStatus, argocd: "Healthy",
	}, {
		name: "a step rolling out", world: func(o *Observed) { o.Deployments[1].Status.UpdatedReplicas = 0 },
		phase: pipelinev1.PipelinePhaseCreating, ready: metav1.ConditionFalse, kstatus: kstatus.InProgressStatus, argocd: "Progressing",
	}, {
		name: "nothing made yet", world: func(o *Observed) {
			*o = Observed{Deployments: make([]*appsv1.Deployment, 2), Services: make([]*corev1.Service, 2)}
		},
		phase: pipelinev1.PipelinePhaseCreating, ready: metav1.ConditionFalse, kstatus: kstatus.InProgressStatus, argocd: "Progressing",
	}, {
		name: "pinned to a node that does not exist", world: func(o *Observed) {
			o.Deployments[0].Status.AvailableReplicas = 0
			o.Problems = []problem.Problem{{Reason: pipelinev1.ReasonNodeNotFound, Message: "step 1 (step-1): node xx-test-node236 does not exist"}}
		},
		phase: pipelinev1.PipelinePhaseFailed, ready: metav1.ConditionFalse, kstatus: kstatus.FailedStatus, argocd: "Degraded",
	}, {
		name: "a child write refused", world: func(o *Observed) {
			o.Err = problem.WithReason(pipelinev1.ReasonApplyRefused, errors.New("apply Deployment d: denied by policy"))
		},
		phase: pipelinev1.PipelinePhaseFailed, ready: metav1.ConditionFalse, kstatus: kstatus.FailedStatus, argocd: "Degraded",
	}, {
		name: "a cordoned node whose pods still serve", world: func(o *Observed) {
			o.Problems = []problem.Problem{{Reason: pipelinev1.ReasonNodeNotReady, Message: "node cordoned", Notice: true}}
		},
		phase: pipelinev1.PipelinePhaseRunning, ready: metav1.ConditionTrue, kstatus: kstatus.CurrentStatus, argocd: "Healthy",
	}, {
		name: "running, but the spec changed since", world: func(*Observed) {}, stale: true,
		phase: pipelinev1.PipelinePhaseRunning, ready: metav1.ConditionTrue, kstatus: kstatus.InProgressStatus, argocd: "Progressing",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := testenv.Sample(t, "default")
			p.Generation = 2
			world := convergedWorld()
			tc.world(world)
			p.Status = Compute(p, world)
			if tc.stale {
				p.Generation = 3
			}
			if p.Status.Phase != tc.phase {
				t.Fatalf("phase %s, want %s", p.Status.Phase, tc.phase)
			}
			ready := meta.FindStatusCondition(p.Status.Conditions, pipelinev1.ConditionReady)
			if ready == nil || ready.Status != tc.ready || ready.Reason == "" || ready.Message == "" {
				t.Errorf("Ready condition %+v, want status %s with a reason and a message", ready, tc.ready)
			}
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: content}
			u.SetAPIVersion(pipelinev1.GroupVersion.String())
			u.SetKind("Pipeline")
			res, err := kstatus.Compute(u)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.kstatus {
				t.Errorf("kstatus %s (%s), want %s", res.Status, res.Message, tc.kstatus)
			}
			health, message, err := argoHealth(string(script), u.Object)
			if err != nil {
				t.Fatal(err)
			}
			if health != tc.argocd || message == "" {
				t.Errorf("Argo CD health %s (%q), want %s with a message", health, message, tc.argocd)
			}
		})
	}
}

// argoHealth runs an Argo CD health script on obj, as Argo CD does: obj is the global obj, the
// script returns a table with status and message.
func argoHealth(script string, obj map[string]any) (string, string, error) {
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		return "", "", fmt.Errorf("run the health script: %w", err)
	}
	hs, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", errors.New("the health script returned no table")
	}
	return hs.RawGetString("status").String(), hs.RawGetString("message").String(), nil
}

// toLua converts unstructured content to Lua values.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	default:
		return lua.LNil
	}
}
