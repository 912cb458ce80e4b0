package status

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
	"github.com/ndsl-cn/pipeline-operator/internal/problem"
	"github.com/ndsl-cn/pipeline-operator/internal/status/statustest"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The router counts in the Pipeline's phase and conditions like a step, named in the messages.
func TestComputeStatusWithRouter(t *testing.T) {
	failed := statustest.AvailableDeployment(1)
	failed.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet has timed out progressing."}}
	rolling := statustest.AvailableDeployment(1)
	rolling.Status.AvailableReplicas = 0
	// The router's Deployment, as the apiserver holds it, has the router's name.
	failed.Name, rolling.Name = "facedetection-pipeline-router", "facedetection-pipeline-router"

	for _, tc := range []struct {
		name        string
		router      *appsv1.Deployment
		service     *corev1.Service
		phase       pipelinev1.PipelinePhase
		routerState pipelinev1.DeploymentState
		condition   string // the condition whose message names the router
		reason      string
	}{
		{name: "available", router: statustest.AvailableDeployment(1), service: statustest.ReadyService(),
			phase: pipelinev1.PipelinePhaseRunning, routerState: pipelinev1.DeploymentStateAvailable,
			condition: pipelinev1.ConditionAvailable, reason: pipelinev1.ReasonAllStepsAvailable},
		{name: "missing", phase: pipelinev1.PipelinePhaseCreating, routerState: pipelinev1.DeploymentStatePending,
			condition: pipelinev1.ConditionProgressing, reason: pipelinev1.ReasonRollingOut},
		{name: "rolling out", router: rolling, service: statustest.ReadyService(),
			phase: pipelinev1.PipelinePhaseCreating, routerState: pipelinev1.DeploymentStateProgressing,
			condition: pipelinev1.ConditionAvailable, reason: pipelinev1.ReasonStepsUnavailable},
		{name: "failed", router: failed, service: statustest.ReadyService(),
			phase: pipelinev1.PipelinePhaseFailed, routerState: pipelinev1.DeploymentStateFailed,
			condition: pipelinev1.ConditionDegraded, reason: pipelinev1.ReasonRouterFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testenv.RoutedSample(t)
			obs := convergedWorld()
			obs.RouterDeployment, obs.RouterService = tc.router, tc.service
			st := Compute(p, obs)
			if st.Phase != tc.phase || st.RouterState != tc.routerState {
				t.Errorf("phase %s, routerState %s; want %s, %s", st.Phase, st.RouterState, tc.phase, tc.routerState)
			}
			if ptr.Deref(st.ReadySteps, -1) != 2 || ptr.Deref(st.TotalSteps, -1) != 2 {
				t.Errorf("readySteps %v, totalSteps %v: the router is not a step", st.ReadySteps, st.TotalSteps)
			}
			c := meta.FindStatusCondition(st.Conditions, tc.condition)
			if c == nil || c.Reason != tc.reason {
				t.Fatalf("%s condition %+v, want reason %s", tc.condition, c, tc.reason)
			}
			if tc.phase != pipelinev1.PipelinePhaseRunning && !strings.Contains(c.Message, "router: Deployment facedetection-pipeline-router") {
				t.Errorf("%s message %q does not name the router", tc.condition, c.Message)
			}
		})
	}

	t.Run("in Chain mode the entry is the first step and routerState is empty", func(t *testing.T) {
		p := testenv.RoutedSample(t)
		p.Spec.DataPath.Mode = pipelinev1.DataPathModeChain
		st := Compute(p, convergedWorld())
		if st.RouterState != "" || st.Phase != pipelinev1.PipelinePhaseRunning {
			t.Errorf("routerState %q, phase %s", st.RouterState, st.Phase)
		}
	})

	t.Run("status.url and nodePort follow the router's Service", func(t *testing.T) {
		p := testenv.RoutedSample(t)
		p.Spec.Expose = &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeLoadBalancer}
		obs := convergedWorld()
		obs.RouterDeployment = statustest.AvailableDeployment(1)
		obs.RouterService = &corev1.Service{
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.0.0.20",
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}}},
		}
		st := Compute(p, obs)
		if st.URL != "http://203.0.113.7:80" || st.NodePort != 30080 {
			t.Errorf("url %q nodePort %d, want the router's", st.URL, st.NodePort)
		}
	})

	t.Run("no router image", func(t *testing.T) {
		p := testenv.RoutedSample(t)
		obs := convergedWorld()
		obs.Problems = []problem.Problem{{Reason: pipelinev1.ReasonRouterImageUnknown, Message: "router: no image"}}
		st := Compute(p, obs)
		c := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionDegraded)
		if st.Phase != pipelinev1.PipelinePhaseFailed || c == nil || c.Status != metav1.ConditionTrue || c.Reason != pipelinev1.ReasonRouterImageUnknown {
			t.Errorf("phase %s, Degraded %+v", st.Phase, c)
		}
	})
}

// The router's pods, read while its Deployment is not available, tell a crash loop from a slow
// start: a router that stops at start makes the Pipeline Degraded (RouterFailed), quoting why
// it stopped, while its Deployment only says it rolls out.
func TestComputeRouterPods(t *testing.T) {
	const refusal = `the tensor mappings do not fit the models: input "x" of step 2 (classify): no output "y" in step 1 (encode)`
	rolling := statustest.AvailableDeployment(1)
	rolling.Status.AvailableReplicas, rolling.Status.ReadyReplicas = 0, 0
	rolling.Name = "facedetection-pipeline-router"
	failed := rolling.DeepCopy()
	failed.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet has timed out progressing."}}
	crashing := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "router-abc"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "router", RestartCount: 4,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: "Error", Message: refusal + "\n"}}}}}}
	leaving := *crashing.DeepCopy()
	leaving.DeletionTimestamp = ptr.To(metav1.Now())
	starting := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "router-def"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "router", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}

	for _, tc := range []struct {
		name        string
		router      *appsv1.Deployment
		pods        []corev1.Pod
		phase       pipelinev1.PipelinePhase
		routerState pipelinev1.DeploymentState
		condition   string
		reason      string
		message     string
	}{
		{name: "crash loop", router: rolling, pods: []corev1.Pod{starting, crashing},
			phase: pipelinev1.PipelinePhaseFailed, routerState: pipelinev1.DeploymentStateProgressing,
			condition: pipelinev1.ConditionDegraded, reason: pipelinev1.ReasonRouterFailed,
			message: "router: pod router-abc, container router: CrashLoopBackOff; its last run ended with exit code 1 (Error) after 4 restarts: " + refusal},
		{name: "starting", router: rolling, pods: []corev1.Pod{starting},
			phase: pipelinev1.PipelinePhaseCreating, routerState: pipelinev1.DeploymentStateProgressing,
			condition: pipelinev1.ConditionAvailable, reason: pipelinev1.ReasonStepsUnavailable,
			message: "router: Deployment facedetection-pipeline-router has 0 of 1 pods available"},
		{name: "a crash-looping pod being deleted", router: rolling, pods: []corev1.Pod{leaving},
			phase: pipelinev1.PipelinePhaseCreating, routerState: pipelinev1.DeploymentStateProgressing,
			condition: pipelinev1.ConditionAvailable, reason: pipelinev1.ReasonStepsUnavailable, message: "router: Deployment"},
		{name: "the Deployment failed: it says so first", router: failed, pods: []corev1.Pod{crashing},
			phase: pipelinev1.PipelinePhaseFailed, routerState: pipelinev1.DeploymentStateFailed,
			condition: pipelinev1.ConditionDegraded, reason: pipelinev1.ReasonRouterFailed,
			message: "router: Deployment facedetection-pipeline-router exceeded its progress deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testenv.RoutedSample(t)
			obs := convergedWorld()
			obs.RouterDeployment, obs.RouterService, obs.RouterPods = tc.router, statustest.ReadyService(), tc.pods
			st := Compute(p, obs)
			if st.Phase != tc.phase || st.RouterState != tc.routerState {
				t.Errorf("phase %s, routerState %s; want %s, %s", st.Phase, st.RouterState, tc.phase, tc.routerState)
			}
			c := meta.FindStatusCondition(st.Conditions, tc.condition)
			if c == nil || c.Reason != tc.reason || !strings.Contains(c.Message, tc.message) {
				t.Fatalf("%s condition %+v, want reason %s and a message containing %q", tc.condition, c, tc.reason, tc.message)
			}
			if d := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionDegraded); tc.condition != pipelinev1.ConditionDegraded &&
				(d == nil || d.Status != metav1.ConditionFalse) {
				t.Errorf("Degraded %+v, want False", d)
			}
		})
	}
}

// The router reports its node as a step does: routerNode and routerNodeReady, and Progressing
// says while it moves to a fallback node or back.
func TestComputeRouterPlacement(t *testing.T) {
	rolling := statustest.AvailableDeployment(1)
	rolling.Status.AvailableReplicas = 0
	rolling.Name = "facedetection-pipeline-router"
	ready := nodes.Health{State: nodes.StateReady}
	down := nodes.Health{State: nodes.StateNotReady}
	for _, tc := range []struct {
		name      string
		router    *appsv1.Deployment
		placement Placement
		node      string
		nodeReady *bool
		reason    string // of Progressing, when it must say the router moves
		message   string
	}{
		{name: "no location", router: statustest.AvailableDeployment(1)},
		{name: "on its location", router: statustest.AvailableDeployment(1), node: "xx-test-node236", nodeReady: ptr.To(true),
			placement: Placement{Decision: nodes.Decision{Node: "xx-test-node236", From: "xx-test-node236", Move: nodes.MoveNone}, Health: ready}},
		{name: "its location not ready", router: statustest.AvailableDeployment(1), node: "xx-test-node236", nodeReady: ptr.To(false),
			placement: Placement{Decision: nodes.Decision{Node: "xx-test-node236", From: "xx-test-node236", Move: nodes.MoveWaiting}, Health: down}},
		{name: "failing over", router: rolling, node: "edge-b", nodeReady: ptr.To(true),
			placement: Placement{Decision: nodes.Decision{Node: "edge-b", From: "xx-test-node236", Move: nodes.MoveFailover},
				Health: ready, From: down, Moved: true},
			reason: pipelinev1.ReasonFailingOver, message: "the router is moving to fallback node edge-b"},
		{name: "failing back", router: rolling, node: "xx-test-node236", nodeReady: ptr.To(true),
			placement: Placement{Decision: nodes.Decision{Node: "xx-test-node236", From: "edge-b", Move: nodes.MoveFailback},
				Health: ready, From: ready, Moved: true},
			reason: pipelinev1.ReasonFailingBack, message: "the router is moving back from node edge-b to node xx-test-node236"},
		{name: "available on the fallback node", router: statustest.AvailableDeployment(1), node: "edge-b", nodeReady: ptr.To(true),
			placement: Placement{Decision: nodes.Decision{Node: "edge-b", From: "edge-b", Move: nodes.MoveNone}, Health: ready}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testenv.RoutedSample(t)
			p.Spec.DataPath.Router.FallbackLocations = []string{"edge-b"}
			obs := convergedWorld()
			obs.RouterDeployment, obs.RouterService, obs.RouterPlacement = tc.router, statustest.ReadyService(), tc.placement
			st := Compute(p, obs)
			if st.RouterNode != tc.node || !reflect.DeepEqual(st.RouterNodeReady, tc.nodeReady) {
				t.Errorf("routerNode %q, routerNodeReady %v; want %q, %v", st.RouterNode, st.RouterNodeReady, tc.node, tc.nodeReady)
			}
			c := meta.FindStatusCondition(st.Conditions, pipelinev1.ConditionProgressing)
			switch {
			case c == nil:
				t.Fatal("no Progressing condition")
			case tc.reason == "" && (c.Reason == pipelinev1.ReasonFailingOver || c.Reason == pipelinev1.ReasonFailingBack):
				t.Errorf("Progressing %s: %s; the router does not move", c.Reason, c.Message)
			case tc.reason != "" && (c.Reason != tc.reason || !strings.Contains(c.Message, tc.message)):
				t.Errorf("Progressing %s: %q; want %s naming %q", c.Reason, c.Message, tc.reason, tc.message)
			}
		})
	}

	t.Run("in Chain mode no router node is reported", func(t *testing.T) {
		p := testenv.RoutedSample(t)
		p.Spec.DataPath.Mode = pipelinev1.DataPathModeChain
		obs := convergedWorld()
		obs.RouterPlacement = Placement{Decision: nodes.Decision{Node: "xx-test-node236"}, Health: ready}
		if st := Compute(p, obs); st.RouterNode != "" || st.RouterNodeReady != nil {
			t.Errorf("routerNode %q, routerNodeReady %v; want none", st.RouterNode, st.RouterNodeReady)
		}
	})
}
