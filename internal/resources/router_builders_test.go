package resources

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestRouterConfigParsesAndNamesTheStepServices(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*pipelinev1.Pipeline)
		want   routerconfig.Config
	}{
		"the sample with router fields on the first step": {
			mutate: func(*pipelinev1.Pipeline) {},
			want: routerconfig.Config{Pipeline: "vision/facedetection-pipeline", Steps: []routerconfig.Step{
				{Name: "step-1", URL: "http://facedetection-pipeline-step-1.vision.svc.cluster.local.:9080/", TimeoutSeconds: 5, Retries: 2, StopWhen: "response.faces == 0"},
				{Name: "step-2", URL: "http://facedetection-pipeline-step-2.vision.svc.cluster.local.:80/"},
			}},
		},
		"named steps, a port and a body limit": {
			mutate: func(p *pipelinev1.Pipeline) {
				p.Spec.Steps[0].Name, p.Spec.Steps[1].Name = "detect", "recognize"
				p.Spec.Steps[1].Port = ptr.To[int32](8000)
				p.Spec.Steps[1].Retries = ptr.To[int32](0)
				p.Spec.DataPath.Router.MaxBodyBytes = ptr.To[int64](1 << 20)
				// Expect was admitted before the router's list of the headers it sets grew: it is
				// left out, so that the router still loads its configuration.
				p.Spec.DataPath.Router.PropagateHeaders = []pipelinev1.HeaderName{"X-User", "Expect", "x-tenant"}
			},
			want: routerconfig.Config{Pipeline: "vision/facedetection-pipeline", MaxBodyBytes: 1 << 20,
				PropagateHeaders: []string{"X-User", "x-tenant"}, Steps: []routerconfig.Step{
					{Name: "detect", URL: "http://facedetection-pipeline-detect.vision.svc.cluster.local.:9080/", TimeoutSeconds: 5, Retries: 2, StopWhen: "response.faces == 0"},
					{Name: "recognize", URL: "http://facedetection-pipeline-recognize.vision.svc.cluster.local.:8000/"},
				}},
		},
		"a step that must not get a request twice, and a request deadline": {
			mutate: func(p *pipelinev1.Pipeline) {
				p.Spec.Steps[1].Idempotent = ptr.To(false)
				p.Spec.DataPath.Router.RequestTimeoutSeconds = ptr.To[int32](30)
			},
			want: routerconfig.Config{Pipeline: "vision/facedetection-pipeline", RequestTimeoutSeconds: 30, Steps: []routerconfig.Step{
				{Name: "step-1", URL: "http://facedetection-pipeline-step-1.vision.svc.cluster.local.:9080/", TimeoutSeconds: 5, Retries: 2, StopWhen: "response.faces == 0"},
				{Name: "step-2", URL: "http://facedetection-pipeline-step-2.vision.svc.cluster.local.:80/", Idempotent: ptr.To(false)},
			}},
		},
		"Open Inference Protocol steps, the second mapping tensors of the request and of the first's answer": {
			mutate: func(p *pipelinev1.Pipeline) {
				p.Spec.Steps[0].Protocol, p.Spec.Steps[1].Protocol = pipelinev1.StepProtocolOpenInference, pipelinev1.StepProtocolOpenInference
				p.Spec.Steps[1].Model = "triton/classifier"
				p.Spec.Steps[1].Inputs = []pipelinev1.StepTensorInput{
					{Name: "embeddings", Step: "step-1", Tensor: "last_hidden_state"}, {Name: "attention_mask", Tensor: "attention_mask"}}
			},
			want: routerconfig.Config{Pipeline: "vision/facedetection-pipeline", Steps: []routerconfig.Step{
				{Name: "step-1", URL: "http://facedetection-pipeline-step-1.vision.svc.cluster.local.:9080/v2/models/facedetection-1/infer",
					TimeoutSeconds: 5, Retries: 2, StopWhen: "response.faces == 0", Protocol: routerconfig.ProtocolOpenInference,
					MetadataURL: "http://facedetection-pipeline-step-1.vision.svc.cluster.local.:9080/v2/models/facedetection-1"},
				{Name: "step-2", URL: "http://facedetection-pipeline-step-2.vision.svc.cluster.local.:80/v2/models/classifier/infer",
					Protocol:    routerconfig.ProtocolOpenInference,
					MetadataURL: "http://facedetection-pipeline-step-2.vision.svc.cluster.local.:80/v2/models/classifier",
					Inputs: []routerconfig.TensorInput{{Name: "embeddings", Step: "step-1", Tensor: "last_hidden_state"},
						{Name: "attention_mask", Tensor: "attention_mask"}}},
			}},
		},
		"a step of the Open Inference Protocol's gRPC service, and a REST one mapping a tensor of its answer": {
			mutate: func(p *pipelinev1.Pipeline) {
				p.Spec.Steps[0].Protocol, p.Spec.Steps[1].Protocol = pipelinev1.StepProtocolOpenInferenceGRPC, pipelinev1.StepProtocolOpenInference
				p.Spec.Steps[0].Model = "triton/encoder"
				p.Spec.Steps[0].StopWhen = ""
				p.Spec.Steps[1].Model = "triton/classifier"
				p.Spec.Steps[1].Inputs = []pipelinev1.StepTensorInput{{Name: "embeddings", Step: "step-1", Tensor: "last_hidden_state"}}
			},
			want: routerconfig.Config{Pipeline: "vision/facedetection-pipeline", Steps: []routerconfig.Step{
				{Name: "step-1", URL: "grpc://facedetection-pipeline-step-1.vision.svc.cluster.local.:9080",
					TimeoutSeconds: 5, Retries: 2, Protocol: routerconfig.ProtocolOpenInferenceGRPC, Model: "encoder"},
				{Name: "step-2", URL: "http://facedetection-pipeline-step-2.vision.svc.cluster.local.:80/v2/models/classifier/infer",
					Protocol:    routerconfig.ProtocolOpenInference,
					MetadataURL: "http://facedetection-pipeline-step-2.vision.svc.cluster.local.:80/v2/models/classifier",
					Inputs:      []routerconfig.TensorInput{{Name: "embeddings", Step: "step-1", Tensor: "last_hidden_state"}}},
			}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := testenv.RoutedSample(t)
			tc.mutate(p)
			data, err := RouterConfigJSON(p, "")
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := routerconfig.ParseConfig([]byte(data))
			if err != nil {
				t.Fatalf("the router refuses the configuration: %v\n%s", err, data)
			}
			if diff := cmp.Diff(tc.want, cfg); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			for i, s := range cfg.Steps {
				want := StepURL(p, i, "") + InferPath(p, i)
				if GRPC(p, i) {
					want = "grpc://" + strings.TrimPrefix(StepURL(p, i, ""), "http://")
				}
				if s.URL != want {
					t.Errorf("step %d url %q, want its Service %q", i, s.URL, want)
				}
			}
		})
	}
}

func TestDesiredRouterConfigMap(t *testing.T) {
	p := testenv.RoutedSample(t)
	data, err := RouterConfigJSON(p, "")
	if err != nil {
		t.Fatal(err)
	}
	cm := testenv.Typed[corev1.ConfigMap](t, RouterConfigMap(p, data))
	if cm.Name != "facedetection-pipeline-router" || cm.Namespace != "vision" {
		t.Errorf("config map is %s/%s", cm.Namespace, cm.Name)
	}
	if diff := cmp.Diff(map[string]string{"config.json": data}, cm.Data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	if cm.Labels[LabelManagedBy] != ManagedBy || cm.Labels[LabelPipeline] != p.Name || cm.Labels[LabelComponent] != "router" {
		t.Errorf("labels %v", cm.Labels)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != p.UID || !ptr.Deref(cm.OwnerReferences[0].Controller, false) {
		t.Errorf("owner references %+v", cm.OwnerReferences)
	}
}

func TestDesiredRouterDeployment(t *testing.T) {
	p := testenv.RoutedSample(t)
	p.Spec.DataPath.Router.Replicas = ptr.To[int32](2)
	p.Spec.DataPath.Router.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}
	data, err := RouterConfigJSON(p, "")
	if err != nil {
		t.Fatal(err)
	}
	d := testenv.Typed[appsv1.Deployment](t, RouterDeployment(p, testenv.RouterImage, data, ""))

	if d.Name != "facedetection-pipeline-router" || d.Namespace != "vision" {
		t.Errorf("deployment is %s/%s", d.Namespace, d.Name)
	}
	if ptr.Deref(d.Spec.Replicas, 0) != 2 {
		t.Errorf("replicas %v", d.Spec.Replicas)
	}
	wantSelector := map[string]string{"pipeline": "facedetection-pipeline", "app.kubernetes.io/component": "router", "app.kubernetes.io/name": "pipeline-router"}
	if diff := cmp.Diff(wantSelector, d.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("selector (-want +got):\n%s", diff)
	}
	for k, v := range wantSelector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("pod label %s=%q, the selector wants %q", k, d.Spec.Template.Labels[k], v)
		}
	}
	if d.Spec.Template.Labels[LabelStep] != "" {
		t.Errorf("router pods carry the step label %q: step selectors would pick them", d.Spec.Template.Labels[LabelStep])
	}
	if got := d.Spec.Template.Annotations[AnnotationRouterConfigHash]; got != shortHash(data) {
		t.Errorf("config hash annotation %q, want %q", got, shortHash(data))
	}

	pod := d.Spec.Template.Spec
	if len(pod.NodeSelector) != 0 {
		t.Errorf("node selector %v: the router is pinned by node name", pod.NodeSelector)
	}
	if diff := cmp.Diff(nameAffinity("xx-test-node236"), pod.Affinity); diff != "" {
		t.Errorf("affinity (-want +got):\n%s", diff)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v, want the RuntimeDefault seccomp profile", pod.SecurityContext)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != testenv.RouterImage {
		t.Errorf("image %q", c.Image)
	}
	if diff := cmp.Diff([]string{"/router"}, c.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	wantArgs := []string{"--config=/etc/pipeline-router/config.json", "--listen=:8080", "--grpc-listen=:8081",
		"--metrics-listen=:9090", "--shutdown-delay=5s", "--shutdown-timeout=3m48s"}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	// The drain: 2 min to receive the body; step 1: 5 s, 3 attempts and 2 back-offs of at most
	// 1.5 s; step 2: 30 s; 1 min to write the answer. The grace period: the shutdown delay (5 s),
	// the drain (3 min 48 s) and a margin (5 s).
	if got := ptr.Deref(pod.TerminationGracePeriodSeconds, 0); got != 238 {
		t.Errorf("termination grace period %d s, want 238", got)
	}
	if len(pod.TopologySpreadConstraints) != 0 {
		t.Errorf("a router pinned to a node is spread: %+v", pod.TopologySpreadConstraints)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/pipeline-router" || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("volume mounts %+v", c.VolumeMounts)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].ConfigMap == nil || pod.Volumes[0].ConfigMap.Name != "facedetection-pipeline-router" {
		t.Errorf("volumes %+v, want the router's ConfigMap", pod.Volumes)
	}
	for name, pr := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != name || pr.HTTPGet.Port != intstr.FromString("metrics") {
			t.Errorf("probe %s is %+v, want GET %s on the metrics port", name, pr, name)
		}
	}
	ports := map[string]int32{}
	for _, cp := range c.Ports {
		ports[cp.Name] = cp.ContainerPort
	}
	if diff := cmp.Diff(map[string]int32{"http": 8080, "grpc": 8081, "metrics": 9090}, ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	sc := c.SecurityContext
	if sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) ||
		!ptr.Deref(sc.ReadOnlyRootFilesystem, false) || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 {
		t.Errorf("security context %+v, want the restricted level's and a read-only root", sc)
	}
	if got := c.Resources.Limits[corev1.ResourceMemory]; got.String() != "128Mi" {
		t.Errorf("memory limit %s", got.String())
	}
	// 9 tenths of 128 MiB (134217728 / 10 * 9).
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "GOMEMLIMIT", Value: "120795948"}}, c.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}

	t.Run("without a location the scheduler chooses, spreading the two replicas of the default over nodes", func(t *testing.T) {
		p := testenv.RoutedSample(t)
		p.Spec.DataPath.Router.Location = ""
		d := testenv.Typed[appsv1.Deployment](t, RouterDeployment(p, testenv.RouterImage, data, ""))
		pod := d.Spec.Template.Spec
		if pod.NodeSelector != nil || pod.Affinity != nil {
			t.Errorf("node selector %v, affinity %v", pod.NodeSelector, pod.Affinity)
		}
		if ptr.Deref(d.Spec.Replicas, 0) != 2 {
			t.Errorf("replicas %v", d.Spec.Replicas)
		}
		want := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: RouterSelector(p)}, MatchLabelKeys: []string{"pod-template-hash"}}}
		if diff := cmp.Diff(want, pod.TopologySpreadConstraints); diff != "" {
			t.Errorf("spread (-want +got):\n%s", diff)
		}
	})

	t.Run("without a memory limit the Go runtime gets no limit", func(t *testing.T) {
		p := testenv.RoutedSample(t)
		p.Spec.DataPath.Router.Resources = nil
		d := testenv.Typed[appsv1.Deployment](t, RouterDeployment(p, testenv.RouterImage, data, ""))
		if env := d.Spec.Template.Spec.Containers[0].Env; len(env) != 0 {
			t.Errorf("env %v", env)
		}
	})
}

// A change of any step's router field changes the configuration, and with it the pod template.
func TestRouterConfigHashFollowsTheConfig(t *testing.T) {
	base := testenv.RoutedSample(t)
	hash := func(p *pipelinev1.Pipeline) string {
		data, err := RouterConfigJSON(p, "")
		if err != nil {
			t.Fatal(err)
		}
		d := testenv.Typed[appsv1.Deployment](t, RouterDeployment(p, testenv.RouterImage, data, ""))
		return d.Spec.Template.Annotations[AnnotationRouterConfigHash]
	}
	before := hash(base)
	if again := hash(base.DeepCopy()); again != before {
		t.Fatalf("the same spec gives hashes %s and %s", before, again)
	}
	for name, mutate := range map[string]func(*pipelinev1.Pipeline){
		"timeout":  func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].TimeoutSeconds = ptr.To[int32](6) },
		"retries":  func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Retries = ptr.To[int32](1) },
		"stopWhen": func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].StopWhen = "status == 404" },
		"port":     func(p *pipelinev1.Pipeline) { p.Spec.Steps[1].Port = ptr.To[int32](81) },
		"a step":   func(p *pipelinev1.Pipeline) { p.Spec.Steps = p.Spec.Steps[:1] },
	} {
		p := base.DeepCopy()
		mutate(p)
		if hash(p) == before {
			t.Errorf("%s: the pod template's config hash did not change", name)
		}
	}
}

func TestDesiredRouterServiceAndEntry(t *testing.T) {
	for name, tc := range map[string]struct {
		expose    *pipelinev1.Expose
		wantType  corev1.ServiceType
		routerOff bool
	}{
		"no expose":    {wantType: corev1.ServiceTypeClusterIP},
		"NodePort":     {expose: &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeNodePort}, wantType: corev1.ServiceTypeNodePort},
		"LoadBalancer": {expose: &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeLoadBalancer}, wantType: corev1.ServiceTypeLoadBalancer},
		"router off":   {expose: &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeNodePort}, wantType: corev1.ServiceTypeNodePort, routerOff: true},
	} {
		t.Run(name, func(t *testing.T) {
			p := testenv.RoutedSample(t)
			p.Spec.Expose = tc.expose
			if tc.routerOff {
				p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain}
			}
			entry := testenv.Typed[corev1.Service](t, StepService(p, 0))
			if tc.routerOff {
				if entry.Spec.Type != tc.wantType {
					t.Errorf("without the router the entry step's Service is %s, want %s", entry.Spec.Type, tc.wantType)
				}
				return
			}
			if entry.Spec.Type != corev1.ServiceTypeClusterIP {
				t.Errorf("with the router the first step's Service is %s, want ClusterIP", entry.Spec.Type)
			}
			svc := testenv.Typed[corev1.Service](t, RouterService(p))
			if svc.Name != "facedetection-pipeline-router" || svc.Spec.Type != tc.wantType {
				t.Errorf("router service %s of type %s, want type %s", svc.Name, svc.Spec.Type, tc.wantType)
			}
			// The Open Inference Protocol's gRPC service, HTTP/2 without TLS, beside HTTP.
			wantPorts := []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "grpc", Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("kubernetes.io/h2c"), Port: 8081,
					TargetPort: intstr.FromString("grpc")},
			}
			if diff := cmp.Diff(wantPorts, svc.Spec.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(RouterSelector(p), svc.Spec.Selector); diff != "" {
				t.Errorf("selector (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("the Ingress routes to the router", func(t *testing.T) {
		p := testenv.RoutedSample(t)
		p.Spec.Expose = &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "infer.example.com"}}
		ing := testenv.Typed[networkingv1.Ingress](t, Ingress(p))
		b := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service
		if b.Name != "facedetection-pipeline-router" || b.Port.Number != 80 {
			t.Errorf("backend %+v, want the router's Service on port 80", b)
		}
	})
}

func TestRouterDrainTimeout(t *testing.T) {
	// Receiving the body (2 min) and writing the answer (1 min) come before and after the
	// request's deadline.
	const body, answer = 2 * time.Minute, time.Minute
	for _, tc := range []struct {
		name  string
		steps []pipelinev1.Step
		want  time.Duration
	}{
		{"defaults", []pipelinev1.Step{{}, {}}, body + 60*time.Second + answer},
		{"timeouts and retries", []pipelinev1.Step{{TimeoutSeconds: ptr.To[int32](10), Retries: ptr.To[int32](1)}, {TimeoutSeconds: ptr.To[int32](2)}},
			body + 10*time.Second*2 + 1500*time.Millisecond + 2*time.Second + answer},
		{"capped", []pipelinev1.Step{{TimeoutSeconds: ptr.To[int32](3600), Retries: ptr.To[int32](10)}}, 10 * time.Minute},
	} {
		p := testenv.RoutedSample(t)
		p.Spec.Steps = tc.steps
		if got := RouterDrainTimeout(p); got != tc.want {
			t.Errorf("%s: drain %s, want %s", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name    string
		timeout int32
		want    time.Duration
	}{
		{"the request deadline set", 30, body + 30*time.Second + answer},
		{"a request deadline above the cap", 86400, 10 * time.Minute},
	} {
		p := testenv.RoutedSample(t)
		p.Spec.DataPath.Router.RequestTimeoutSeconds = ptr.To(tc.timeout)
		if got := RouterDrainTimeout(p); got != tc.want {
			t.Errorf("%s: drain %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestRouterDisruptionBudget(t *testing.T) {
	p := testenv.RoutedSample(t)
	if RouterWantsDisruptionBudget(p) {
		t.Error("a router pinned to a node wants a disruption budget: a drain of that node would wait for ever")
	}
	p.Spec.DataPath.Router.Location = ""
	if !RouterWantsDisruptionBudget(p) {
		t.Error("a router of two unpinned pods (the default) wants no disruption budget")
	}
	p.Spec.DataPath.Router.Replicas = ptr.To[int32](1)
	if RouterWantsDisruptionBudget(p) {
		t.Error("a router of one pod wants a disruption budget: it would forbid every eviction")
	}
	p.Spec.DataPath.Router.Replicas = nil
	pdb := testenv.Typed[policyv1.PodDisruptionBudget](t, RouterPDB(p))
	if pdb.Name != "facedetection-pipeline-router" || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 ||
		!cmp.Equal(pdb.Spec.Selector.MatchLabels, RouterSelector(p)) || pdb.Spec.UnhealthyPodEvictionPolicy == nil ||
		*pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
		t.Errorf("router budget %+v", pdb.Spec)
	}
}

// The router's Deployment is pinned to the node placement chose: its location's, a fallback
// location's after a failover, by node name; the rest of the Deployment does not change with it.
func TestRouterDeploymentPinning(t *testing.T) {
	base := testenv.RoutedSample(t)
	base.Spec.DataPath.Router.FallbackLocations = []string{"edge-b", "edge-c"}
	data, err := RouterConfigJSON(base, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		location string
		node     string
		want     string // the node the pods are pinned to; empty: not pinned, spread
	}{
		{name: "no decision yet: the location", location: "xx-test-node236", want: "xx-test-node236"},
		{name: "on the location's node", location: "xx-test-node236", node: "xx-test-node236", want: "xx-test-node236"},
		{name: "a location resolved by hostname: the node's name", location: "xx-test-node236", node: "node-236.edge", want: "node-236.edge"},
		{name: "failed over to the first fallback", location: "xx-test-node236", node: "edge-b", want: "edge-b"},
		{name: "failed over to the second fallback", location: "xx-test-node236", node: "edge-c", want: "edge-c"},
		{name: "no location", location: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base.DeepCopy()
			p.Spec.DataPath.Router.Location = tc.location
			d := testenv.Typed[appsv1.Deployment](t, RouterDeployment(p, testenv.RouterImage, data, tc.node))
			pod := d.Spec.Template.Spec
			if got := PinnedNode(&pod); got != tc.want {
				t.Errorf("pinned to %q, want %q", got, tc.want)
			}
			if len(pod.NodeSelector) != 0 {
				t.Errorf("node selector %v: the router is pinned by node name", pod.NodeSelector)
			}
			if spread := len(pod.TopologySpreadConstraints) > 0; spread != (tc.want == "") {
				t.Errorf("spread %v, pinned to %q: a pinned router is not spread, an unpinned one is", spread, tc.want)
			}
			if tc.want != "" {
				if diff := cmp.Diff(nameAffinity(tc.want), pod.Affinity); diff != "" {
					t.Errorf("affinity (-want +got):\n%s", diff)
				}
			}
			// The node is all a move changes: the config hash, and with it the pods' configuration, stays.
			if got := d.Spec.Template.Annotations[AnnotationRouterConfigHash]; got != shortHash(data) {
				t.Errorf("config hash %q, want %q", got, shortHash(data))
			}
		})
	}
	if RouterWantsDisruptionBudget(base) {
		t.Error("a router pinned to a node, fallbackLocations or not, wants a disruption budget: a drain of that node would wait for ever")
	}
}
