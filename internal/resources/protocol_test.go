package resources

import (
	"fmt"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// oipSample is the sample whose second step serves models/resnet-50 in the Open Inference
// Protocol on port 8000.
func oipSample(t *testing.T, edit func(*pipelinev1.Step)) *pipelinev1.Pipeline {
	p := testenv.Sample(t, "edge")
	s := &p.Spec.Steps[1]
	s.Protocol, s.Model, s.Port = pipelinev1.StepProtocolOpenInference, "models/resnet-50", ptr.To[int32](8000)
	if edit != nil {
		edit(s)
	}
	return p
}

func getProbe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8000)}},
		PeriodSeconds: period, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: failures}
}

func tcpProbe(period, failures int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8000)}},
		PeriodSeconds: period, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: failures}
}

func TestOpenInferenceProbes(t *testing.T) {
	own := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8000)}}}
	grpcHealth := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 8000}}, PeriodSeconds: 5}
	grpcStep := func(s *pipelinev1.Step) { s.Protocol = pipelinev1.StepProtocolOpenInferenceGRPC }
	tests := []struct {
		name                         string
		edit                         func(*pipelinev1.Step)
		readiness, liveness, startup *corev1.Probe
	}{{
		name:      "protocol defaults, 600 s to load",
		readiness: getProbe("/v2/models/resnet-50/ready", 5, 3),
		liveness:  getProbe("/v2/health/live", 10, 3),
		startup:   getProbe("/v2/models/resnet-50/ready", 10, 60),
	}, {
		name:      "modelLoadTimeoutSeconds, rounded up to a whole period",
		edit:      func(s *pipelinev1.Step) { s.ModelLoadTimeoutSeconds = ptr.To[int32](1805) },
		readiness: getProbe("/v2/models/resnet-50/ready", 5, 3),
		liveness:  getProbe("/v2/health/live", 10, 3),
		startup:   getProbe("/v2/models/resnet-50/ready", 10, 181),
	}, {
		name:      "the step's own probes win, one by one",
		edit:      func(s *pipelinev1.Step) { s.ReadinessProbe, s.StartupProbe = own, own },
		readiness: own,
		liveness:  getProbe("/v2/health/live", 10, 3),
		startup:   own,
	}, {
		name:      "a model name is escaped in the path",
		edit:      func(s *pipelinev1.Step) { s.Model = "models/bert base" },
		readiness: getProbe("/v2/models/bert%20base/ready", 5, 3),
		liveness:  getProbe("/v2/health/live", 10, 3),
		startup:   getProbe("/v2/models/bert%20base/ready", 10, 60),
	}, {
		// Not every gRPC model server has the standard gRPC health service that Kubernetes'
		// grpc probes call: the defaults only connect to the port.
		name:      "gRPC: TCP on the port, 600 s to load",
		edit:      grpcStep,
		readiness: tcpProbe(5, 3),
		liveness:  tcpProbe(10, 3),
		startup:   tcpProbe(10, 60),
	}, {
		name: "gRPC: modelLoadTimeoutSeconds, rounded up to a whole period",
		edit: func(s *pipelinev1.Step) {
			grpcStep(s)
			s.ModelLoadTimeoutSeconds = ptr.To[int32](1805)
		},
		readiness: tcpProbe(5, 3),
		liveness:  tcpProbe(10, 3),
		startup:   tcpProbe(10, 181),
	}, {
		name: "gRPC: a server with the gRPC health service declares its grpc probes",
		edit: func(s *pipelinev1.Step) {
			grpcStep(s)
			s.ReadinessProbe, s.LivenessProbe = grpcHealth, grpcHealth
		},
		readiness: grpcHealth,
		liveness:  grpcHealth,
		startup:   tcpProbe(10, 60),
	}, {
		name:     "HTTP: only what the step declares",
		edit:     func(s *pipelinev1.Step) { s.Protocol, s.LivenessProbe = pipelinev1.StepProtocolHTTP, own },
		liveness: own,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := oipSample(t, tt.edit)
			readiness, liveness, startup := StepProbes(p, 1)
			for _, c := range []struct {
				what      string
				got, want *corev1.Probe
			}{{"readiness", readiness, tt.readiness}, {"liveness", liveness, tt.liveness}, {"startup", startup, tt.startup}} {
				if diff := gocmp.Diff(c.want, c.got); diff != "" {
					t.Errorf("%s probe (-want +got):\n%s", c.what, diff)
				}
			}
			// And the container gets them.
			d := StepDeployment(p, 1, PodSecurityRestricted, "", "")
			c := d.Spec.Template.Spec.Containers[0]
			if (c.ReadinessProbe != nil) != (tt.readiness != nil) || (c.LivenessProbe != nil) != (tt.liveness != nil) ||
				(c.StartupProbe != nil) != (tt.startup != nil) {
				t.Errorf("the container's probes are not the step's: readiness %v, liveness %v, startup %v",
					c.ReadinessProbe != nil, c.LivenessProbe != nil, c.StartupProbe != nil)
			}
			if tt.startup != nil && tt.startup.HTTPGet != nil && ptr.Deref(c.StartupProbe.HTTPGet.Path, "") != tt.startup.HTTPGet.Path {
				t.Errorf("container startup probe path %q, want %q", ptr.Deref(c.StartupProbe.HTTPGet.Path, ""), tt.startup.HTTPGet.Path)
			}
			if tt.startup != nil && tt.startup.TCPSocket != nil && (c.StartupProbe.TCPSocket == nil || c.StartupProbe.HTTPGet != nil) {
				t.Errorf("container startup probe %+v, want a TCP probe", c.StartupProbe)
			}
		})
	}
}

// The router posts to /v2/models/<name>/infer of a step of the Open Inference Protocol, to the
// root of any other, and calls the gRPC service of a step of OpenInferenceProtocolGRPC at the
// host and port of its Service.
func TestRouterCallsTheInferPath(t *testing.T) {
	p := oipSample(t, nil)
	cfg := RouterConfig(p, "")
	if want := StepURL(p, 0, "") + "/"; cfg.Steps[0].URL != want {
		t.Errorf("step 1 called at %q, want %q", cfg.Steps[0].URL, want)
	}
	if want := StepURL(p, 1, "") + "/v2/models/resnet-50/infer"; cfg.Steps[1].URL != want {
		t.Errorf("step 2 called at %q, want %q", cfg.Steps[1].URL, want)
	}

	p = oipSample(t, func(s *pipelinev1.Step) { s.Protocol = pipelinev1.StepProtocolOpenInferenceGRPC })
	cfg = RouterConfig(p, "")
	if want := "grpc://" + strings.TrimPrefix(StepURL(p, 1, ""), "http://"); cfg.Steps[1].URL != want {
		t.Errorf("gRPC step 2 called at %q, want %q", cfg.Steps[1].URL, want)
	}
	if got := InferPath(p, 1); got != "" {
		t.Errorf("gRPC step 2 has the infer path %q", got)
	}
}

// An Open Inference Protocol step has its model's metadata URL and its mapped inputs in the
// router's configuration, which the router accepts; a plain step has neither.
func TestRouterConfigMapsTensors(t *testing.T) {
	p := oipSample(t, nil)
	p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter}
	first := &p.Spec.Steps[0]
	first.Protocol, first.Model = pipelinev1.StepProtocolOpenInference, "models/tokenizer"
	p.Spec.Steps[1].Inputs = []pipelinev1.StepTensorInput{
		{Name: "input_ids", Step: first.Name, Tensor: "ids"}, {Name: "mask", Tensor: "attention_mask"}}
	p.Spec.DataPath.Router = &pipelinev1.Router{Outputs: []pipelinev1.PipelineTensorOutput{
		{Name: "tokens", Step: first.Name, Tensor: "ids"}, {Name: "labels", Step: p.Spec.Steps[1].Name, Tensor: "probabilities"}}}
	cfg := RouterConfig(p, "")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the router refuses its configuration: %v", err)
	}
	s := cfg.Steps[1]
	if s.Protocol != "OpenInferenceProtocol" || s.MetadataURL != StepURL(p, 1, "")+"/v2/models/resnet-50" {
		t.Errorf("step 2: protocol %q, metadataURL %q", s.Protocol, s.MetadataURL)
	}
	want := `[{input_ids tokenize ids} {mask  attention_mask}]`
	if got := fmt.Sprint(s.Inputs); got != strings.Replace(want, "tokenize", first.Name, 1) {
		t.Errorf("step 2 inputs %s", got)
	}
	want = fmt.Sprintf("[{tokens %s ids} {labels %s probabilities}]", first.Name, p.Spec.Steps[1].Name)
	if got := fmt.Sprint(cfg.Outputs); got != want {
		t.Errorf("the answer's outputs %s, want %s", got, want)
	}
	if cfg.Steps[0].MetadataURL != StepURL(p, 0, "")+"/v2/models/tokenizer" || cfg.Steps[0].Inputs != nil {
		t.Errorf("step 1: metadataURL %q, inputs %v", cfg.Steps[0].MetadataURL, cfg.Steps[0].Inputs)
	}

	plain := testenv.Sample(t, "edge")
	plain.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter}
	data, err := RouterConfigJSON(plain, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"protocol", "metadataURL", "inputs", "outputs"} {
		if strings.Contains(data, key) {
			t.Errorf("a Pipeline without Open Inference Protocol steps has %q in its router configuration:\n%s", key, data)
		}
	}
}

// A step of OpenInferenceProtocolGRPC names its model in the router's configuration, has no
// metadata URL (the router calls ModelMetadata) and may map tensors and be mapped from, which the
// router accepts.
func TestRouterConfigOfGRPCSteps(t *testing.T) {
	p := oipSample(t, nil)
	p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter}
	first := &p.Spec.Steps[0]
	first.Protocol, first.Model = pipelinev1.StepProtocolOpenInferenceGRPC, "models/tokenizer"
	second := &p.Spec.Steps[1]
	second.Inputs = []pipelinev1.StepTensorInput{{Name: "input_ids", Step: first.Name, Tensor: "ids"}}
	p.Spec.DataPath.Router = &pipelinev1.Router{Outputs: []pipelinev1.PipelineTensorOutput{
		{Name: "tokens", Step: first.Name, Tensor: "ids"}}}
	cfg := RouterConfig(p, "cluster.example")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the router refuses its configuration: %v", err)
	}
	// The host and port of the step's Service, no path; no metadataURL.
	want := routerconfig.Step{
		Name:     "step-1",
		URL:      "grpc://facedetection-pipeline-step-1.edge.svc.cluster.example.:9080",
		Protocol: routerconfig.ProtocolOpenInferenceGRPC,
		Model:    "tokenizer",
	}
	if diff := gocmp.Diff(want, cfg.Steps[0]); diff != "" {
		t.Errorf("gRPC step (-want +got):\n%s", diff)
	}
	if !cfg.Steps[0].GRPC() || !cfg.Steps[0].HasMetadata() {
		t.Errorf("the router does not take step 1 for a gRPC step with metadata: %+v", cfg.Steps[0])
	}
	if s := cfg.Steps[1]; s.Protocol != routerconfig.ProtocolOpenInference || s.Model != "" || len(s.Inputs) != 1 {
		t.Errorf("the REST step beside it: %+v", s)
	}
}
