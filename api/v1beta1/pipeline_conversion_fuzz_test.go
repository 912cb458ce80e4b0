package v1beta1

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// fuzzRounds is how many random objects each direction of the round trip converts.
const fuzzRounds = 10000

// TestFuzzRoundTripV1beta1 converts random v1beta1 Pipelines to v1 and back, each through
// JSON as the conversion webhook sends them, and expects the object it started from.
func TestFuzzRoundTripV1beta1(t *testing.T) {
	f := newFiller(1)
	kept := 0
	for i := range fuzzRounds {
		var in Pipeline
		f.Fill(&in)
		var hub pipelinev1.Pipeline
		if err := in.DeepCopy().ConvertTo(&hub); err != nil {
			t.Fatalf("object %d: ConvertTo: %v", i, err)
		}
		hub = viaJSON(t, hub)
		if _, ok := hub.Annotations[ConversionDataAnnotation]; ok {
			kept++
		}
		var out Pipeline
		if err := out.ConvertFrom(&hub); err != nil {
			t.Fatalf("object %d: ConvertFrom: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(in, out) {
			t.Fatalf("object %d: v1beta1 -> v1 -> v1beta1 changed it (-in +out):\n%s", i, cmp.Diff(in, out))
		}
	}
	checkKept(t, kept)
}

// checkKept fails unless the round trips went through conversion data (objects that convert
// without any are the table tests' part).
func checkKept(t *testing.T, kept int) {
	t.Helper()
	t.Logf("%d of %d objects kept conversion data", kept, fuzzRounds)
	if kept < fuzzRounds/2 {
		t.Errorf("only %d of %d objects kept conversion data: the fill functions no longer make what a version cannot hold", kept, fuzzRounds)
	}
}

// TestFuzzRoundTripV1 converts random v1 Pipelines to v1beta1 and back.
func TestFuzzRoundTripV1(t *testing.T) {
	f := newFiller(2)
	kept := 0
	withField := map[string]int{}
	for i := range fuzzRounds {
		var in pipelinev1.Pipeline
		f.Fill(&in)
		for _, name := range v1OnlyStepFields(&in) {
			withField[name]++
		}
		var spoke Pipeline
		if err := spoke.ConvertFrom(in.DeepCopy()); err != nil {
			t.Fatalf("object %d: ConvertFrom: %v", i, err)
		}
		spoke = viaJSON(t, spoke)
		if _, ok := spoke.Annotations[ConversionDataAnnotation]; ok {
			kept++
		}
		var out pipelinev1.Pipeline
		if err := spoke.ConvertTo(&out); err != nil {
			t.Fatalf("object %d: ConvertTo: %v", i, err)
		}
		if !apiequality.Semantic.DeepEqual(in, out) {
			t.Fatalf("object %d: v1 -> v1beta1 -> v1 changed it (-in +out):\n%s", i, cmp.Diff(in, out))
		}
	}
	checkKept(t, kept)
	for _, name := range v1OnlyStepFieldNames {
		if withField[name] < fuzzRounds/10 {
			t.Errorf("only %d of %d objects have a step with %s: the fill functions no longer make it", withField[name], fuzzRounds, name)
		}
	}
}

// v1OnlyStepFieldNames are the fields of a v1 step that v1beta1 has not.
var v1OnlyStepFieldNames = []string{"command", "args", "readinessProbe", "livenessProbe", "startupProbe", "podMetadata",
	"runtimeClassName", "sharedMemorySize", "imagePullSecrets", "terminationGracePeriodSeconds", "protocol",
	"modelLoadTimeoutSeconds", "inputs", "outputs"}

// v1OnlyStepFields are the fields of v1OnlyStepFieldNames that a step of p sets.
func v1OnlyStepFields(p *pipelinev1.Pipeline) []string {
	var out []string
	for _, name := range v1OnlyStepFieldNames {
		for _, s := range p.Spec.Steps {
			set := map[string]bool{
				"command": len(s.Command) > 0, "args": len(s.Args) > 0, "readinessProbe": s.ReadinessProbe != nil,
				"livenessProbe": s.LivenessProbe != nil, "startupProbe": s.StartupProbe != nil,
				"podMetadata":      s.PodMetadata != nil && (len(s.PodMetadata.Labels) > 0 || len(s.PodMetadata.Annotations) > 0),
				"runtimeClassName": s.RuntimeClassName != "", "sharedMemorySize": s.SharedMemorySize != nil,
				"imagePullSecrets": len(s.ImagePullSecrets) > 0, "terminationGracePeriodSeconds": s.TerminationGracePeriodSeconds != nil,
				"protocol": s.Protocol != "", "modelLoadTimeoutSeconds": s.ModelLoadTimeoutSeconds != nil, "inputs": len(s.Inputs) > 0,
				"outputs": len(s.Outputs) > 0,
			}
			if set[name] {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

func viaJSON[T any](t *testing.T, obj T) T {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Values the fill functions pick from: few, so that names and keys meet.
var (
	fuzzNames      = []string{"", "step-1", "step-2", "step-3", "router", "detect", "recognize"}
	fuzzEnvNames   = []string{"listenPort", "LOG_LEVEL", "BATCH_SIZE", "MODEL_NAME", "A", "B"}
	fuzzPorts      = []string{"9080", "80", "080", "0", "65536", "http", ""}
	fuzzAnnotation = []string{"true", "false", "True", ""}
	fuzzTensors    = []string{"", "input_ids", "attention_mask", "last_hidden_state", "logits", "x"}
)

func pick[T any](c randfill.Continue, values []T) T { return values[c.Intn(len(values))] }

// newFiller fills objects of both versions with shapes the apiserver can hold: enum fields
// with values of their version, unique list-map keys, no conversion data, quantities and
// times that survive JSON.
func newFiller(seed int64) *randfill.Filler {
	funcs := append(commonFillFuncs(), v1beta1FillFuncs()...)
	funcs = append(funcs, v1FillFuncs()...)
	return randfill.NewWithSeed(seed).NilChance(0.3).NumElements(0, 3).Funcs(funcs...)
}

func commonFillFuncs() []any {
	return []any{
		func(*metav1.TypeMeta, randfill.Continue) {},
		func(m *metav1.ObjectMeta, c randfill.Continue) {
			m.Name, m.Namespace = "p"+c.String(5), "ns"
			c.Fill(&m.Labels)
			c.Fill(&m.Annotations)
			for _, key := range []string{PausedAnnotation, FailbackAnnotation} {
				if c.Intn(3) == 0 {
					if m.Annotations == nil {
						m.Annotations = map[string]string{}
					}
					m.Annotations[key] = pick(c, fuzzAnnotation)
				}
			}
		},
		func(q *resource.Quantity, c randfill.Continue) {
			// As JSON gives it, as the webhook reads it: in the format its string parses to,
			// so that its string (a part of the storage identity) stays what it is.
			*q = resource.MustParse(resource.NewQuantity(c.Int63n(1<<40), resource.BinarySI).String())
		},
		func(tm *metav1.Time, c randfill.Continue) {
			*tm = metav1.Unix(c.Int63n(1<<31), 0)
		},
		func(e *[]corev1.EnvVar, c randfill.Continue) {
			seen := map[string]bool{}
			for range c.Intn(4) {
				var v corev1.EnvVar
				c.FillNoCustom(&v)
				v.Name = pick(c, fuzzEnvNames)
				if seen[v.Name] {
					continue
				}
				seen[v.Name] = true
				if c.Bool() {
					v.ValueFrom = nil
				}
				*e = append(*e, v)
			}
		},
	}
}

func v1beta1FillFuncs() []any {
	return []any{
		func(s *Step, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Name = pick(c, fuzzNames)
			s.Args = nil
			for range c.Intn(4) {
				if s.Args == nil {
					s.Args = map[string]ArgValue{}
				}
				k := pick(c, fuzzEnvNames)
				s.Args[k] = ArgValue(c.String(4))
				if k == ListenPortArg {
					s.Args[k] = ArgValue(pick(c, fuzzPorts))
				}
			}
		},
		func(m *ModelStorage, c randfill.Continue) {
			c.FillNoCustom(m)
			m.Type = pick(c, []StorageType{"", StorageTypeNFS, StorageTypeCSI, StorageTypeStorageClass, StorageTypeExistingClaim, StorageTypeModelStorageClass})
			for _, k := range []string{nfsServerParameter, nfsShareParameter, CSIDriverParameter} {
				if c.Bool() {
					if m.CSIParameter == nil {
						m.CSIParameter = map[string]string{}
					}
					m.CSIParameter[k] = pick(c, []string{"", "nfs.csi.k8s.io", "/exports", "10.0.0.1"})
				}
			}
		},
		func(p *PipelinePhase, c randfill.Continue) {
			*p = pick(c, []PipelinePhase{"", PipelinePhaseCreating, PipelinePhaseRunning, PipelinePhaseFailed, PipelinePhaseDeleting})
		},
		func(s *PipelineStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Models = pick(c, []string{"", "a", "a,b", "a,,b", c.String(6)})
			s.ReadySteps = pick(c, []string{"", "0/1", "2/3", "0/0", "02/3", "3", "x/y", "-1/2"})
		},
	}
}

func v1FillFuncs() []any {
	return []any{
		func(s *[]pipelinev1.Step, c randfill.Continue) {
			seen := map[string]bool{}
			for range 1 + c.Intn(3) {
				var st pipelinev1.Step
				c.Fill(&st)
				st.Name = pick(c, fuzzNames[1:])
				if seen[st.Name] {
					continue
				}
				seen[st.Name] = true
				*s = append(*s, st)
			}
		},
		func(m *pipelinev1.ModelStorage, c randfill.Continue) {
			c.FillNoCustom(m)
			m.Type = pick(c, []pipelinev1.ModelStorageType{pipelinev1.ModelStorageTypeNFS, pipelinev1.ModelStorageTypeCSI,
				pipelinev1.ModelStorageTypeStorageClass, pipelinev1.ModelStorageTypeExistingClaim, pipelinev1.ModelStorageTypeModelStorageClass})
			if c.Intn(4) != 0 { // mostly the one member of the type, as the CEL rules demand
				keep := *m
				*m = pipelinev1.ModelStorage{Type: m.Type, MountPath: m.MountPath}
				switch m.Type {
				case pipelinev1.ModelStorageTypeNFS:
					m.NFS = keep.NFS
				case pipelinev1.ModelStorageTypeCSI:
					m.CSI = keep.CSI
				case pipelinev1.ModelStorageTypeStorageClass:
					m.StorageClass = keep.StorageClass
				case pipelinev1.ModelStorageTypeExistingClaim:
					m.ExistingClaim = keep.ExistingClaim
				case pipelinev1.ModelStorageTypeModelStorageClass:
					m.ModelStorageClass = keep.ModelStorageClass
				}
			}
		},
		func(p *pipelinev1.StepProtocol, c randfill.Continue) {
			*p = pick(c, []pipelinev1.StepProtocol{"", pipelinev1.StepProtocolHTTP, pipelinev1.StepProtocolOpenInference,
				pipelinev1.StepProtocolOpenInferenceGRPC})
		},
		func(in *[]pipelinev1.StepTensorInput, c randfill.Continue) {
			seen := map[string]bool{}
			for range c.Intn(4) {
				t := pipelinev1.StepTensorInput{Name: pick(c, fuzzTensors[1:]), Step: pick(c, fuzzNames), Tensor: pick(c, fuzzTensors[1:])}
				if seen[t.Name] {
					continue
				}
				seen[t.Name] = true
				*in = append(*in, t)
			}
		},
		func(m *pipelinev1.DataPathMode, c randfill.Continue) {
			*m = pick(c, []pipelinev1.DataPathMode{"", pipelinev1.DataPathModeChain, pipelinev1.DataPathModeRouter})
		},
		func(p *pipelinev1.PipelinePhase, c randfill.Continue) {
			*p = pick(c, []pipelinev1.PipelinePhase{"", pipelinev1.PipelinePhaseCreating, pipelinev1.PipelinePhaseRunning,
				pipelinev1.PipelinePhaseFailed, pipelinev1.PipelinePhaseDeleting})
		},
		func(s *pipelinev1.PipelineStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			if c.Bool() {
				s.Models = []string{"a", "b"}
			}
		},
	}
}

// TestFuzzRouterOneToOne converts random enabled routers, fallbackLocations included, and the
// router's status to v1 and back with nothing kept: every field has its place in both versions.
func TestFuzzRouterOneToOne(t *testing.T) {
	f := newFiller(3)
	for i := range fuzzRounds {
		var in Router
		f.Fill(&in)
		in.Enabled = true
		hub := viaJSON(t, routerTo(spokeRouter{Router: &in}))
		if r := hub.DataPath.Router; len(in.FallbackLocations) > 0 && (r == nil || !apiequality.Semantic.DeepEqual(r.FallbackLocations, in.FallbackLocations)) {
			t.Fatalf("router %d: fallbackLocations %v became %+v", i, in.FallbackLocations, r)
		}
		if out := routerFrom(hub); !apiequality.Semantic.DeepEqual(*out.Router, in) {
			t.Fatalf("router %d: v1beta1 -> v1 -> v1beta1 changed it (-in +out):\n%s", i, cmp.Diff(in, *out.Router))
		}

		var st DetailPhase
		f.Fill(&st)
		st.IngressPhase, st.RouterPhase, st.StepsPhase = "", "", nil
		status := PipelineStatus{DetailPhase: st}
		back := statusFrom(viaJSON(t, statusTo(status)))
		if back.DetailPhase.RouterNode != st.RouterNode || !apiequality.Semantic.DeepEqual(back.DetailPhase.RouterNodeReady, st.RouterNodeReady) {
			t.Fatalf("status %d: router node %q ready %v came back as %q ready %v", i, st.RouterNode, st.RouterNodeReady,
				back.DetailPhase.RouterNode, back.DetailPhase.RouterNodeReady)
		}
	}
}
