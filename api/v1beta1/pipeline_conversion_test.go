package v1beta1

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// seedPipeline is the Pipeline of docs/api.md's minimal example, as users write it.
func seedPipeline() *Pipeline {
	return &Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "facedetection-pipeline", Namespace: "default"},
		Spec: PipelineSpec{
			Steps: []Step{
				{Image: "nginx:latest", Location: "xx-test-node236", Model: "facedetection-1", Args: map[string]ArgValue{"listenPort": "9080"}},
				{Image: "nginx:latest", Location: "xx-test-node239", Model: "facedetection-2", Args: map[string]ArgValue{}},
			},
			ModelStorage: ModelStorage{
				Type:         StorageTypeNFS,
				CSIParameter: map[string]string{"server": "192.168.20.235", "share": "/home/aiedge/csiTest"},
			},
		},
		Status: PipelineStatus{Phase: PipelinePhaseRunning, Models: "facedetection-1,facedetection-2", ReadySteps: "2/2"},
	}
}

func toV1(t *testing.T, p *Pipeline) *pipelinev1.Pipeline {
	t.Helper()
	var hub pipelinev1.Pipeline
	if err := p.DeepCopy().ConvertTo(&hub); err != nil {
		t.Fatal(err)
	}
	return &hub
}

func fromV1(t *testing.T, hub *pipelinev1.Pipeline) *Pipeline {
	t.Helper()
	var p Pipeline
	if err := p.ConvertFrom(hub.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestConvertSeedPipeline(t *testing.T) {
	in := seedPipeline()
	hub := toV1(t, in)

	want := pipelinev1.PipelineSpec{
		Steps: []pipelinev1.Step{
			{Name: "step-1", Image: "nginx:latest", Location: "xx-test-node236", Model: "facedetection-1",
				Port: ptrTo[int32](9080), Env: []corev1.EnvVar{{Name: "listenPort", Value: "9080"}}},
			{Name: "step-2", Image: "nginx:latest", Location: "xx-test-node239", Model: "facedetection-2"},
		},
		ModelStorage: pipelinev1.ModelStorage{
			Type: pipelinev1.ModelStorageTypeNFS,
			NFS:  &pipelinev1.NFSStorage{Server: "192.168.20.235", Path: "/home/aiedge/csiTest"},
		},
	}
	if !apiequality.Semantic.DeepEqual(hub.Spec, want) {
		t.Errorf("v1 spec (-want +got):\n%s", cmp.Diff(want, hub.Spec))
	}
	wantStatus := pipelinev1.PipelineStatus{
		Phase: pipelinev1.PipelinePhaseRunning, Models: []string{"facedetection-1", "facedetection-2"},
		ReadySteps: ptrTo[int32](2), TotalSteps: ptrTo[int32](2), Ready: "2/2", ModelNames: "facedetection-1, facedetection-2",
	}
	if !apiequality.Semantic.DeepEqual(hub.Status, wantStatus) {
		t.Errorf("v1 status (-want +got):\n%s", cmp.Diff(wantStatus, hub.Status))
	}
	// The unnamed steps and the port that came from args.listenPort are kept.
	wantData := `{"steps":{"0":{"unnamed":true,"args":["listenPort"],"portUnset":true},"1":{"unnamed":true}}}`
	if got := hub.Annotations[ConversionDataAnnotation]; got != wantData {
		t.Errorf("conversion data %s, want %s", got, wantData)
	}

	out := fromV1(t, hub)
	if !apiequality.Semantic.DeepEqual(out, in) {
		t.Errorf("back to v1beta1 (-want +got):\n%s", cmp.Diff(in, out))
	}
	if _, ok := out.Annotations[ConversionDataAnnotation]; ok {
		t.Errorf("conversion data left on the v1beta1 Pipeline: %v", out.Annotations)
	}
}

func TestConvertAnnotationsToFields(t *testing.T) {
	in := seedPipeline()
	in.Annotations = map[string]string{PausedAnnotation: "true", FailbackAnnotation: "true", "team": "vision"}
	in.Spec.Failover = &Failover{Failback: FailbackManual}
	hub := toV1(t, in)
	if hub.Spec.Paused == nil || !*hub.Spec.Paused {
		t.Errorf("spec.paused = %v, want true", hub.Spec.Paused)
	}
	if f := hub.Spec.Failover; f == nil || f.FailbackNow == nil || !*f.FailbackNow || f.Failback != pipelinev1.FailbackManual {
		t.Errorf("spec.failover = %+v, want failback Manual and failbackNow true", f)
	}
	for _, key := range []string{PausedAnnotation, FailbackAnnotation} {
		if _, ok := hub.Annotations[key]; ok {
			t.Errorf("v1 Pipeline still carries %s", key)
		}
	}
	if hub.Annotations["team"] != "vision" {
		t.Errorf("other annotations lost: %v", hub.Annotations)
	}
	if out := fromV1(t, hub); !apiequality.Semantic.DeepEqual(out, in) {
		t.Errorf("back to v1beta1 (-want +got):\n%s", cmp.Diff(in, out))
	}

	// A v1 Pipeline paused by its field reads as annotated in v1beta1.
	hub = toV1(t, seedPipeline())
	hub.Spec.Paused = ptrTo(true)
	if got := fromV1(t, hub).Annotations[PausedAnnotation]; got != "true" {
		t.Errorf("v1beta1 %s = %q, want true", PausedAnnotation, got)
	}
	// Any other value of the annotation means nothing, and stays.
	in = seedPipeline()
	in.Annotations = map[string]string{PausedAnnotation: "yes"}
	if hub := toV1(t, in); hub.Spec.Paused != nil || hub.Annotations[PausedAnnotation] != "yes" {
		t.Errorf("annotation yes: spec.paused %v, annotations %v", hub.Spec.Paused, hub.Annotations)
	}
}

// TestConvertV1beta1RoundTrip names what v1 cannot hold of a v1beta1 Pipeline: each converts to
// v1 and back to what it was.
func TestConvertV1beta1RoundTrip(t *testing.T) {
	for name, edit := range map[string]func(p *Pipeline){
		"args and env of one name": func(p *Pipeline) {
			p.Spec.Steps[0].Args = map[string]ArgValue{"LOG_LEVEL": "debug", "listenPort": "9080", "B": "1"}
			p.Spec.Steps[0].Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "C", Value: "2"}}
		},
		"port and listenPort both": func(p *Pipeline) { p.Spec.Steps[0].Port = ptrTo[int32](9080) },
		"named and unnamed steps":  func(p *Pipeline) { p.Spec.Steps[1].Name = "recognize" },
		"csiParameter with unknown keys": func(p *Pipeline) {
			p.Spec.ModelStorage.CSIParameter["mountOptions"] = "nfsvers=4.1"
		},
		"csi without driver": func(p *Pipeline) {
			p.Spec.ModelStorage.Type = StorageTypeCSI
		},
		"type unset": func(p *Pipeline) { p.Spec.ModelStorage.Type = "" },
		"existingClaim with capacity": func(p *Pipeline) {
			p.Spec.ModelStorage = ModelStorage{Type: StorageTypeExistingClaim, ClaimName: "models", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}
		},
		"router disabled with settings": func(p *Pipeline) {
			p.Spec.Router = &Router{Replicas: ptrTo[int32](2), PropagateHeaders: []HeaderName{"X-User"}}
		},
		"router enabled": func(p *Pipeline) { p.Spec.Router = &Router{Enabled: true, Location: "edge-1"} },
		"lower-case phases": func(p *Pipeline) {
			p.Status.Phase = PipelinePhaseFailed
			p.Status.DetailPhase.StepsPhase = []StepStatus{{Name: "step-1", DeploymentPhase: DeploymentPhaseFailed, Replicas: 1}}
		},
		"readySteps written otherwise": func(p *Pipeline) { p.Status.ReadySteps = "02/2" },
		"failback annotation without failover": func(p *Pipeline) {
			p.Annotations = map[string]string{FailbackAnnotation: "true"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := seedPipeline()
			edit(in)
			out := fromV1(t, toV1(t, in))
			if !apiequality.Semantic.DeepEqual(out, in) {
				t.Errorf("(-want +got):\n%s", cmp.Diff(in, out))
			}
		})
	}
}

// TestConvertV1RoundTrip names what v1beta1 cannot hold of a v1 Pipeline.
func TestConvertV1RoundTrip(t *testing.T) {
	for name, edit := range map[string]func(p *pipelinev1.Pipeline){
		"csi attribute named driver": func(p *pipelinev1.Pipeline) {
			p.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
				CSI: &pipelinev1.CSIStorage{Driver: "nfs.csi.k8s.io", VolumeAttributes: map[string]string{"driver": "x", "server": "s"}}}
		},
		"paused false":      func(p *pipelinev1.Pipeline) { p.Spec.Paused = ptrTo(false) },
		"failbackNow false": func(p *pipelinev1.Pipeline) { p.Spec.Failover = &pipelinev1.Failover{FailbackNow: ptrTo(false)} },
		"data path Chain": func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain}
		},
		"router with no settings": func(p *pipelinev1.Pipeline) {
			p.Spec.DataPath = &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter, Router: &pipelinev1.Router{}}
		},
		"status without counts": func(p *pipelinev1.Pipeline) { p.Status.ReadySteps, p.Status.TotalSteps = nil, ptrTo[int32](2) },
		"model server fields":   func(p *pipelinev1.Pipeline) { p.Spec.Steps[0] = modelServerStep(p.Spec.Steps[0]) },
	} {
		t.Run(name, func(t *testing.T) {
			in := toV1(t, seedPipeline())
			delete(in.Annotations, ConversionDataAnnotation)
			in.Spec.Steps[0].Name, in.Spec.Steps[1].Name = "detect", "recognize"
			edit(in)
			out := toV1(t, fromV1(t, in))
			if !apiequality.Semantic.DeepEqual(out, in) {
				t.Errorf("(-want +got):\n%s", cmp.Diff(in, out))
			}
		})
	}
}

// TestConvertV1EditWins checks that what a v1 Pipeline kept of its v1beta1 form is not used
// once the v1 Pipeline changed the part it describes.
func TestConvertV1EditWins(t *testing.T) {
	hub := toV1(t, seedPipeline())
	hub.Spec.Steps[0].Port = ptrTo[int32](8080) // listenPort stays 9080 in env
	out := fromV1(t, hub)
	if p := out.Spec.Steps[0].Port; p == nil || *p != 8080 {
		t.Errorf("port %v, want 8080", p)
	}
	if out.Spec.Steps[0].Name != "step-1" || len(out.Spec.Steps[0].Args) != 0 {
		t.Errorf("edited step restored from kept data: %+v", out.Spec.Steps[0])
	}
	if out.Spec.Steps[1].Name != "" {
		t.Errorf("unchanged step 2 not restored: name %q", out.Spec.Steps[1].Name)
	}
}

// TestConvertRouterFallbackLocations checks that the router's fallbackLocations and the node it
// runs on convert one to one, without conversion data.
func TestConvertRouterFallbackLocations(t *testing.T) {
	in := seedPipeline()
	in.Spec.Router = &Router{Enabled: true, Location: "edge-1", FallbackLocations: []string{"edge-2", "edge-3"}}
	in.Status.DetailPhase.RouterNode, in.Status.DetailPhase.RouterNodeReady = "edge-2", ptrTo(true)
	hub := toV1(t, in)
	want := &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter,
		Router: &pipelinev1.Router{Location: "edge-1", FallbackLocations: []string{"edge-2", "edge-3"}}}
	if !apiequality.Semantic.DeepEqual(hub.Spec.DataPath, want) {
		t.Errorf("v1 dataPath (-want +got):\n%s", cmp.Diff(want, hub.Spec.DataPath))
	}
	if hub.Status.RouterNode != "edge-2" || hub.Status.RouterNodeReady == nil || !*hub.Status.RouterNodeReady {
		t.Errorf("v1 status routerNode %q, routerNodeReady %v; want edge-2, true", hub.Status.RouterNode, hub.Status.RouterNodeReady)
	}
	if data := hub.Annotations[ConversionDataAnnotation]; strings.Contains(data, "router") || strings.Contains(data, "dataPath") {
		t.Errorf("the router was kept as conversion data: %s", data)
	}
	if out := fromV1(t, hub); !apiequality.Semantic.DeepEqual(out, in) {
		t.Errorf("back to v1beta1 (-want +got):\n%s", cmp.Diff(in, out))
	}
}

// modelServerStep is step s with every field a model server needs, which v1beta1 has not.
func modelServerStep(s pipelinev1.Step) pipelinev1.Step {
	s.Command = []string{"tritonserver"}
	s.Args = []string{"--model-repository=$(MODEL_PATH)"}
	s.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/v2/health/ready", Port: intstr.FromString("http")}}, PeriodSeconds: 5}
	s.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8000)}}}
	s.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, FailureThreshold: 60}
	s.PodMetadata = &pipelinev1.StepPodMetadata{Labels: map[string]string{"team": "vision"},
		Annotations: map[string]string{"prometheus.io/scrape": "true"}}
	s.RuntimeClassName = "nvidia"
	q := resource.MustParse("2Gi")
	s.SharedMemorySize = &q
	s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
	s.TerminationGracePeriodSeconds = ptrTo[int64](120)
	s.Protocol = pipelinev1.StepProtocolOpenInference
	s.Inputs = []pipelinev1.StepTensorInput{{Name: "pixels", Tensor: "image"}}
	return s
}

// A v1 step with the fields v1beta1 has not reads in v1beta1 as the step without them, the whole
// v1 step kept in the conversion data: written back unchanged, or with another step edited, it
// keeps every field; edited itself in v1beta1, the edit wins and the fields v1beta1 cannot show
// are gone.
func TestConvertV1ModelServerStep(t *testing.T) {
	in := toV1(t, seedPipeline())
	delete(in.Annotations, ConversionDataAnnotation)
	in.Spec.Steps[0].Name, in.Spec.Steps[1].Name = "detect", "recognize"
	in.Spec.Steps[0] = modelServerStep(in.Spec.Steps[0])

	spoke := fromV1(t, in)
	if s := spoke.Spec.Steps[0]; s.Name != "detect" || s.Image != "nginx:latest" || len(s.Args) != 0 {
		t.Errorf("v1beta1 step %+v", s)
	}
	if data := spoke.Annotations[ConversionDataAnnotation]; !strings.Contains(data, `"readinessProbe"`) || !strings.Contains(data, `"podMetadata"`) ||
		!strings.Contains(data, `"inputs"`) {
		t.Errorf("the v1 step is not kept in the conversion data: %s", data)
	}
	if out := toV1(t, spoke); !apiequality.Semantic.DeepEqual(out, in) {
		t.Errorf("written back unchanged (-want +got):\n%s", cmp.Diff(in, out))
	}

	other := spoke.DeepCopy()
	other.Spec.Steps[1].Image = "nginx:1.27"
	want := in.DeepCopy()
	want.Spec.Steps[1].Image = "nginx:1.27"
	if out := toV1(t, other); !apiequality.Semantic.DeepEqual(out, want) {
		t.Errorf("another step edited in v1beta1 (-want +got):\n%s", cmp.Diff(want, out))
	}

	edited := spoke.DeepCopy()
	edited.Spec.Steps[0].Image = "nginx:1.27"
	if s := toV1(t, edited).Spec.Steps[0]; s.Image != "nginx:1.27" || s.ReadinessProbe != nil || s.Command != nil || s.PodMetadata != nil || s.Inputs != nil {
		t.Errorf("the step edited in v1beta1 is %+v, want the edit and none of the fields v1beta1 cannot show", s)
	}
}

// A step made in v1beta1 with args, given the fields v1beta1 has not in v1, keeps both through
// v1beta1: read there it shows its args again, and written back it is the v1 step it was, with
// the conversion data that keeps its args first in the container's environment.
func TestConvertV1beta1StepGivenModelServerFieldsInV1(t *testing.T) {
	in := toV1(t, seedPipeline())
	in.Spec.Steps[0] = modelServerStep(in.Spec.Steps[0])

	spoke := fromV1(t, in)
	if s := spoke.Spec.Steps[0]; s.Name != "" || s.Args[ListenPortArg] != "9080" || len(s.Env) != 0 || s.Port != nil {
		t.Errorf("v1beta1 step %+v, want the seed's step as it was written", s)
	}
	out := toV1(t, spoke)
	if !apiequality.Semantic.DeepEqual(out, in) {
		t.Errorf("back to v1 (-want +got):\n%s", cmp.Diff(in, out))
	}
	if lead := out.LeadingEnv(0); len(lead) != 1 || lead[0] != ListenPortArg {
		t.Errorf("leading env %v, want the former arg listenPort", lead)
	}
}

// A v1 step of protocol OpenInferenceProtocolGRPC, which v1beta1 cannot show, keeps its protocol
// through v1beta1 in the conversion data.
func TestConvertV1GRPCStep(t *testing.T) {
	in := toV1(t, seedPipeline())
	delete(in.Annotations, ConversionDataAnnotation)
	s := &in.Spec.Steps[1]
	s.Protocol, s.ModelLoadTimeoutSeconds = pipelinev1.StepProtocolOpenInferenceGRPC, ptrTo[int32](1200)

	spoke := fromV1(t, in)
	if data := spoke.Annotations[ConversionDataAnnotation]; !strings.Contains(data, `"OpenInferenceProtocolGRPC"`) {
		t.Errorf("the protocol is not kept in the conversion data: %s", data)
	}
	if out := toV1(t, spoke); !apiequality.Semantic.DeepEqual(out, in) {
		t.Errorf("written back unchanged (-want +got):\n%s", cmp.Diff(in, out))
	}
}
