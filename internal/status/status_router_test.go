package status

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
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
		phase       pipelinev1beta1.PipelinePhase
		routerPhase pipelinev1beta1.DeploymentPhase
		condition   string // the condition whose message names the router
		reason      string
	}{
		{name: "available", router: statustest.AvailableDeployment(1), service: statustest.ReadyService(),
			phase: pipelinev1beta1.PipelinePhaseRunning, routerPhase: pipelinev1beta1.DeploymentPhaseAvailable,
			condition: pipelinev1beta1.ConditionAvailable, reason: pipelinev1beta1.ReasonAllStepsAvailable},
		{name: "missing", phase: pipelinev1beta1.PipelinePhaseCreating, routerPhase: pipelinev1beta1.DeploymentPhasePending,
			condition: pipelinev1beta1.ConditionProgressing, reason: pipelinev1beta1.ReasonRollingOut},
		{name: "rolling out", router: rolling, service: statustest.ReadyService(),
			phase: pipelinev1beta1.PipelinePhaseCreating, routerPhase: pipelinev1beta1.DeploymentPhaseProgressing,
			condition: pipelinev1beta1.ConditionAvailable, reason: pipelinev1beta1.ReasonStepsUnavailable},
		{name: "failed", router: failed, service: statustest.ReadyService(),
			phase: pipelinev1beta1.PipelinePhaseFailed, routerPhase: pipelinev1beta1.DeploymentPhaseFailed,
			condition: pipelinev1beta1.ConditionDegraded, reason: pipelinev1beta1.ReasonRouterFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testenv.RoutedSample(t)
			obs := convergedWorld()
			obs.RouterDeployment, obs.RouterService = tc.router, tc.service
			st := Compute(p, obs)
			if st.Phase != tc.phase || st.DetailPhase.RouterPhase != tc.routerPhase {
				t.Errorf("phase %s, routerPhase %s; want %s, %s", st.Phase, st.DetailPhase.RouterPhase, tc.phase, tc.routerPhase)
			}
			if st.ReadySteps != "2/2" {
				t.Errorf("readySteps %s: the router is not a step", st.ReadySteps)
			}
			c := meta.FindStatusCondition(st.Conditions, tc.condition)
			if c == nil || c.Reason != tc.reason {
				t.Fatalf("%s condition %+v, want reason %s", tc.condition, c, tc.reason)
			}
			if tc.phase != pipelinev1beta1.PipelinePhaseRunning && !strings.Contains(c.Message, "router: Deployment facedetection-pipeline-router") {
				t.Errorf("%s message %q does not name the router", tc.condition, c.Message)
			}
		})
	}

	t.Run("without the router the entry is the first step and routerPhase is empty", func(t *testing.T) {
		p := testenv.RoutedSample(t)
		p.Spec.Router.Enabled = false
		st := Compute(p, convergedWorld())
		if st.DetailPhase.RouterPhase != "" || st.Phase != pipelinev1beta1.PipelinePhaseRunning {
			t.Errorf("routerPhase %q, phase %s", st.DetailPhase.RouterPhase, st.Phase)
		}
	})

	t.Run("status.url and nodePort follow the router's Service", func(t *testing.T) {
		p := testenv.RoutedSample(t)
		p.Spec.Expose = &pipelinev1beta1.Expose{ServiceType: pipelinev1beta1.ServiceTypeLoadBalancer}
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
		obs.Problems = []problem.Problem{{Reason: pipelinev1beta1.ReasonRouterImageUnknown, Message: "router: no image"}}
		st := Compute(p, obs)
		c := meta.FindStatusCondition(st.Conditions, pipelinev1beta1.ConditionDegraded)
		if st.Phase != pipelinev1beta1.PipelinePhaseFailed || c == nil || c.Status != metav1.ConditionTrue || c.Reason != pipelinev1beta1.ReasonRouterImageUnknown {
			t.Errorf("phase %s, Degraded %+v", st.Phase, c)
		}
	})
}
