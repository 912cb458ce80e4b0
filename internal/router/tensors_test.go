package router

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// modelServer is an Open Inference Protocol server of one FP32 model on a loopback address:
// it declares its metadata once loaded (after loadFor), and computes outputs from inputs with
// compute. It reads and writes JSON tensors and the binary data extension on its own, without
// the router's code.
type modelServer struct {
	*httptest.Server
	name    string
	inputs  []modelTensor
	outputs []modelTensor
	compute func(in map[string][]float32) map[string][]float32
	loaded  atomic.Bool
	// requests are the request bodies the model got, JSON part only.
	requests atomic.Value
	// hold, when set, runs before the model computes: an error is its answer, 500.
	hold func(r *http.Request) error
}

type modelTensor struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

type wireTensor struct {
	Name       string         `json:"name"`
	Shape      []int64        `json:"shape"`
	Datatype   string         `json:"datatype"`
	Parameters map[string]any `json:"parameters,omitempty"`
	Data       []float32      `json:"data,omitempty"`
}

func newModelServer(t *testing.T, name string, loadFor time.Duration, inputs, outputs []modelTensor,
	compute func(map[string][]float32) map[string][]float32) *modelServer {
	t.Helper()
	m := &modelServer{name: name, inputs: inputs, outputs: outputs, compute: compute}
	m.requests.Store("")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/models/"+name, func(w http.ResponseWriter, _ *http.Request) {
		if !m.loaded.Load() {
			http.Error(w, `{"error":"model is loading"}`, http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"name": name, "platform": "test", "inputs": inputs, "outputs": outputs})
	})
	mux.HandleFunc("POST /v2/models/"+name+"/infer", m.infer)
	m.Server = httptest.NewServer(mux)
	t.Cleanup(m.Close)
	if loadFor == 0 {
		m.loaded.Store(true)
	} else {
		time.AfterFunc(loadFor, func() { m.loaded.Store(true) })
	}
	return m
}

func (m *modelServer) metadataURL() string { return m.URL + "/v2/models/" + m.name }
func (m *modelServer) inferURL() string    { return m.URL + "/v2/models/" + m.name + "/infer" }

func (m *modelServer) infer(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if m.hold != nil {
		if err := m.hold(r); err != nil {
			http.Error(w, fmt.Sprintf(`{"error":%q}`, err), http.StatusInternalServerError)
			return
		}
	}
	doc, rest := body, []byte(nil)
	if h := r.Header.Get("Inference-Header-Content-Length"); h != "" {
		n, _ := strconv.Atoi(h)
		doc, rest = body[:n], body[n:]
	}
	m.requests.Store(string(doc))
	var req struct {
		Inputs     []wireTensor `json:"inputs"`
		Outputs    []struct{ Name string }
		Parameters map[string]any `json:"parameters"`
	}
	if err := json.Unmarshal(doc, &req); err != nil {
		http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
		return
	}
	in := map[string][]float32{}
	for _, t := range req.Inputs {
		if size, ok := t.Parameters["binary_data_size"].(float64); ok {
			data := rest[:int(size)]
			rest = rest[int(size):]
			for i := 0; i+4 <= len(data); i += 4 {
				t.Data = append(t.Data, math.Float32frombits(binary.LittleEndian.Uint32(data[i:])))
			}
		}
		in[t.Name] = t.Data
	}
	for _, want := range m.inputs {
		if _, ok := in[want.Name]; !ok {
			http.Error(w, fmt.Sprintf(`{"error":"input %s missing"}`, want.Name), http.StatusBadRequest)
			return
		}
	}
	out := m.compute(in)
	binaryOut := req.Parameters["binary_data_output"] == true
	resp := map[string]any{"model_name": m.name}
	outputs := []wireTensor{}
	var tail []byte
	for _, o := range m.outputs {
		// A request that names outputs gets those alone.
		if len(req.Outputs) > 0 && !slices.ContainsFunc(req.Outputs, func(r struct{ Name string }) bool { return r.Name == o.Name }) {
			continue
		}
		wt := wireTensor{Name: o.Name, Datatype: "FP32", Shape: []int64{1, int64(len(out[o.Name]))}}
		if binaryOut {
			for _, f := range out[o.Name] {
				tail = binary.LittleEndian.AppendUint32(tail, math.Float32bits(f))
			}
			wt.Parameters = map[string]any{"binary_data_size": 4 * len(out[o.Name])}
		} else {
			wt.Data = out[o.Name]
		}
		outputs = append(outputs, wt)
	}
	resp["outputs"] = outputs
	head, _ := json.Marshal(resp)
	if binaryOut {
		w.Header().Set("Inference-Header-Content-Length", strconv.Itoa(len(head)))
		w.Header().Set("Content-Type", "application/octet-stream")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	_, _ = w.Write(append(head, tail...))
}

var fp32x4 = []int64{-1, 4}

// scaleModel doubles x into y and sums it into norm.
func scaleModel(t *testing.T, loadFor time.Duration) *modelServer {
	return newModelServer(t, "scale", loadFor,
		[]modelTensor{{"x", "FP32", fp32x4}},
		[]modelTensor{{"y", "FP32", fp32x4}, {"norm", "FP32", []int64{-1, 1}}},
		func(in map[string][]float32) map[string][]float32 {
			var y []float32
			var norm float32
			for _, v := range in["x"] {
				y = append(y, 2*v)
				norm += v
			}
			return map[string][]float32{"y": y, "norm": {norm}}
		})
}

// addModel adds a and b, whose datatype is bType, into sum.
func addModel(t *testing.T, bType string) *modelServer {
	return newModelServer(t, "add", 0,
		[]modelTensor{{"a", "FP32", fp32x4}, {"b", bType, fp32x4}},
		[]modelTensor{{"sum", "FP32", fp32x4}}, add)
}

// add is the add model's computation: sum is a + b.
func add(in map[string][]float32) map[string][]float32 {
	sum := make([]float32, len(in["a"]))
	for i := range sum {
		sum[i] = in["a"][i] + in["b"][i]
	}
	return map[string][]float32{"sum": sum}
}

// mappedConfig is scale then add: add's a is scale's output y and its b the request's
// input0, so that sum is 3 × input0.
func mappedConfig(scale, add *modelServer, yName string) config.Config {
	return config.Config{Steps: []config.Step{
		{Name: "scale", URL: scale.inferURL(), Protocol: config.ProtocolOpenInference, MetadataURL: scale.metadataURL(),
			Inputs: []config.TensorInput{{Name: "x", Tensor: "input0"}}},
		{Name: "add", URL: add.inferURL(), Protocol: config.ProtocolOpenInference, MetadataURL: add.metadataURL(),
			Inputs: []config.TensorInput{{Name: "a", Step: "scale", Tensor: yName}, {Name: "b", Tensor: "input0"}}},
	}}
}

const jsonRequest = `{"inputs":[{"name":"input0","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}`

// outputsOf decodes the FP32 outputs of an Open Inference Protocol answer, JSON or binary.
func outputsOf(t *testing.T, a answer) map[string][]float32 {
	t.Helper()
	doc, rest := []byte(a.body), []byte(nil)
	if h := a.header.Get("Inference-Header-Content-Length"); h != "" {
		n, _ := strconv.Atoi(h)
		doc, rest = doc[:n], doc[n:]
	}
	var resp struct {
		Outputs []wireTensor `json:"outputs"`
	}
	if err := json.Unmarshal(doc, &resp); err != nil {
		t.Fatalf("answer %d %q: %v", a.status, a.body, err)
	}
	out := map[string][]float32{}
	for _, o := range resp.Outputs {
		if size, ok := o.Parameters["binary_data_size"].(float64); ok {
			for i := 0; i < int(size); i += 4 {
				o.Data = append(o.Data, math.Float32frombits(binary.LittleEndian.Uint32(rest[i:])))
			}
			rest = rest[int(size):]
		}
		out[o.Name] = o.Data
	}
	return out
}

func TestTensorMappingEndToEnd(t *testing.T) {
	scale, add := scaleModel(t, 300*time.Millisecond), addModel(t, "FP32")
	s := serveRouter(t, mappedConfig(scale, add, "y"), 0)

	// Not ready while scale loads its model; ready once both models' metadata admit the
	// mappings.
	if code, _ := get(t, s.adminURL+"/readyz"); code == http.StatusOK {
		t.Fatal("the router is ready before the models' metadata is read")
	}
	eventually(t, "ready once the models are loaded", func() bool {
		code, _ := get(t, s.adminURL+"/readyz")
		return code == http.StatusOK
	})

	a := post(t, s.url, "application/json", jsonRequest, nil)
	if a.status != http.StatusOK {
		t.Fatalf("answer %d %s", a.status, a.body)
	}
	if got, want := fmt.Sprint(outputsOf(t, a)["sum"]), "[3 6 9 12]"; got != want {
		t.Fatalf("sum = %s, want %s (3 × input0)", got, want)
	}
	// add got its inputs under its own names, with the shapes and datatypes of their sources.
	var req struct{ Inputs []wireTensor }
	if err := json.Unmarshal([]byte(add.requests.Load().(string)), &req); err != nil {
		t.Fatal(err)
	}
	if len(req.Inputs) != 2 || req.Inputs[0].Name != "a" || req.Inputs[1].Name != "b" ||
		fmt.Sprint(req.Inputs[0].Shape) != "[1 4]" || req.Inputs[1].Datatype != "FP32" {
		t.Fatalf("add's request = %s", add.requests.Load())
	}
}

func TestTensorMappingBinaryData(t *testing.T) {
	scale, add := scaleModel(t, 0), addModel(t, "FP32")
	tr := newTestRouter(t, mappedConfig(scale, add, "y"))
	head := `{"inputs":[{"name":"input0","shape":[1,4],"datatype":"FP32","parameters":{"binary_data_size":16}}]}`
	var data []byte
	for _, f := range []float32{0.5, -1, 10, 2.25} {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(f))
	}
	a := post(t, tr.url, "application/octet-stream", head+string(data),
		http.Header{"Inference-Header-Content-Length": {strconv.Itoa(len(head))}})
	if a.status != http.StatusOK {
		t.Fatalf("answer %d %s", a.status, a.body)
	}
	if a.header.Get("Inference-Header-Content-Length") == "" {
		t.Fatalf("the answer is not binary: %s", a.body)
	}
	if got, want := fmt.Sprint(outputsOf(t, a)["sum"]), "[1.5 -3 30 6.75]"; got != want {
		t.Fatalf("sum = %s, want %s", got, want)
	}
	// The steps were asked for binary outputs, and sent binary inputs.
	if got := add.requests.Load().(string); !strings.Contains(got, `"binary_data_output":true`) ||
		!strings.Contains(got, `"binary_data_size":16`) || strings.Contains(got, `"data"`) {
		t.Fatalf("add's request = %s", got)
	}
}

// refusedByMetadata serves cfg, which the models' metadata refuse, and returns the problems the
// router stops with.
func refusedByMetadata(t *testing.T, cfg config.Config) []string {
	t.Helper()
	s := serveRouter(t, cfg, 0)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the router still serves what the models refuse")
	}
	var me *MappingError
	if !errors.As(s.err, &me) {
		t.Fatalf("Serve returned %v, want a *MappingError", s.err)
	}
	return me.Problems
}

func TestTensorMappingRefusedByMetadata(t *testing.T) {
	for _, tc := range []struct {
		name, yName, bType, want string
	}{
		{"no such output", "z", "FP32",
			`input "a" of step 2 (add): model scale of step 1 (scale) has no output "z" (its outputs: y, norm)`},
		{"datatypes differ", "y", "INT64", ""},
		{"shapes differ", "norm", "FP32",
			`input "a" of step 2 (add): output "norm" of step 1 (scale) has shape [-1,1], the input is [-1,4]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scale, add := scaleModel(t, 0), addModel(t, tc.bType)
			cfg := mappedConfig(scale, add, tc.yName)
			if tc.bType == "INT64" {
				// b of the request is checked per request; map it from scale's y instead.
				cfg.Steps[1].Inputs[1] = config.TensorInput{Name: "b", Step: "scale", Tensor: "y"}
				tc.want = `input "b" of step 2 (add): output "y" of step 1 (scale) has datatype FP32, the input is INT64`
			}
			if problems := refusedByMetadata(t, cfg); len(problems) != 1 || problems[0] != tc.want {
				t.Fatalf("problems = %q, want [%q]", problems, tc.want)
			}
		})
	}
}

func TestTensorMappingRefusesABadRequest(t *testing.T) {
	scale, add := scaleModel(t, 0), addModel(t, "FP32")
	tr := newTestRouter(t, mappedConfig(scale, add, "y"))
	if err := tr.CheckModels(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"no such tensor", `{"inputs":[{"name":"other","shape":[1],"datatype":"FP32","data":[1]}]}`,
			`input "x" of step 1 (scale): the pipeline's request has no tensor "input0"`},
		{"wrong datatype", `{"inputs":[{"name":"input0","shape":[1,4],"datatype":"INT32","data":[1,2,3,4]}]}`,
			`input "x" of step 1 (scale): tensor "input0" of the pipeline's request has datatype INT32, the input is FP32`},
		{"not the protocol", `{"text":"hello"}`,
			`input "x" of step 1 (scale): the pipeline's request is not an Open Inference Protocol body`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, tr.url, "application/json", tc.body, nil)
			if a.status != http.StatusBadRequest {
				t.Fatalf("answer %d %s, want 400", a.status, a.body)
			}
			if e := a.errorBody(t); e.Error != tc.want || e.Reason != ReasonBadRequest {
				t.Fatalf("error %q (%s), want %q", e.Error, e.Reason, tc.want)
			}
		})
	}
	if n := scale.requests.Load().(string); n != "" {
		t.Fatalf("scale was called with %s", n)
	}
}

func TestTensorMappingStepAnswerWithoutTensor(t *testing.T) {
	// scale's metadata declares y, but its answer lacks it: 502, naming both steps.
	scale := newModelServer(t, "scale", 0,
		[]modelTensor{{"x", "FP32", fp32x4}}, []modelTensor{{"y", "FP32", fp32x4}},
		func(map[string][]float32) map[string][]float32 { return nil })
	scale.outputs = nil
	add := addModel(t, "FP32")
	tr := newTestRouter(t, mappedConfig(scale, add, "y"))
	a := post(t, tr.url, "application/json", jsonRequest, nil)
	if a.status != http.StatusBadGateway {
		t.Fatalf("answer %d %s, want 502", a.status, a.body)
	}
	if e := a.errorBody(t); e.Reason != ReasonTensorMapping ||
		e.Error != `input "a" of step 2 (add): the answer of step 1 (scale) has no tensor "y"` {
		t.Fatalf("error %q (%s)", e.Error, e.Reason)
	}
}

func TestStopWhenReadsTensors(t *testing.T) {
	scale, add := scaleModel(t, 0), addModel(t, "FP32")
	cfg := mappedConfig(scale, add, "y")
	cfg.Steps[0].StopWhen = `tensors.norm[0] > 100.0 && size(tensors.y) == 4`
	tr := newTestRouter(t, cfg)
	big := `{"inputs":[{"name":"input0","shape":[1,4],"datatype":"FP32","data":[100,2,3,4]}]}`
	for _, tc := range []struct{ body, last string }{{jsonRequest, "add"}, {big, "scale"}} {
		a := post(t, tr.url, "application/json", tc.body, nil)
		if a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != tc.last {
			t.Fatalf("answer %d from %q, want 200 from %q: %s", a.status, a.header.Get(config.HeaderLastStep), tc.last, a.body)
		}
	}
	// The same with binary tensors, which the expression reads decoded.
	head := `{"inputs":[{"name":"input0","shape":[1,4],"datatype":"FP32","parameters":{"binary_data_size":16}}]}`
	var data bytes.Buffer
	for _, f := range []float32{100, 2, 3, 4} {
		_ = binary.Write(&data, binary.LittleEndian, f)
	}
	a := post(t, tr.url, "application/octet-stream", head+data.String(),
		http.Header{"Inference-Header-Content-Length": {strconv.Itoa(len(head))}})
	if a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != "scale" {
		t.Fatalf("binary: answer %d from %q: %s", a.status, a.header.Get(config.HeaderLastStep), a.body)
	}
}

func TestTensorMappingConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*config.Config)
		want string
	}{
		{"inputs of a plain step", func(c *config.Config) { c.Steps[1].Protocol, c.Steps[1].MetadataURL = "", "" },
			"steps[1]: inputs: only a step of protocol OpenInferenceProtocol with a metadataURL, or of protocol OpenInferenceProtocolGRPC, has mapped inputs"},
		{"a later step", func(c *config.Config) { c.Steps[0].Inputs[0].Step = "add" },
			`steps[0].inputs[0].step: "add" is not an earlier step`},
		{"itself", func(c *config.Config) { c.Steps[1].Inputs[0].Step = "add" },
			`steps[1].inputs[0].step: "add" is not an earlier step`},
		{"twice", func(c *config.Config) { c.Steps[1].Inputs[1].Name = "a" },
			`steps[1]: inputs[1].name: "a" is mapped twice`},
		{"tensors of a plain step", func(c *config.Config) {
			c.Steps = append(c.Steps, config.Step{Name: "plain", URL: "http://127.0.0.1:1/", StopWhen: "size(tensors) > 0"})
		}, "steps[2]: stopWhen: reads tensors, which only the answer of a step of protocol OpenInferenceProtocol or OpenInferenceProtocolGRPC has"},
		{"a gRPC step without its model", func(c *config.Config) {
			c.Steps[1] = config.Step{Name: "add", URL: "grpc://127.0.0.1:2", Protocol: config.ProtocolOpenInferenceGRPC, Inputs: c.Steps[1].Inputs}
		}, "steps[1]: model: required for a step of protocol OpenInferenceProtocolGRPC"},
		{"a gRPC step of an http URL", func(c *config.Config) {
			c.Steps[1] = config.Step{Name: "add", URL: "http://127.0.0.1:2", Protocol: config.ProtocolOpenInferenceGRPC, Model: "add"}
		}, `steps[1]: url: "http://127.0.0.1:2": the scheme of a step of protocol OpenInferenceProtocolGRPC must be grpc`},
		{"a gRPC step's URL with a path", func(c *config.Config) {
			c.Steps[1] = config.Step{Name: "add", URL: "grpc://127.0.0.1:2/v2/models/add", Protocol: config.ProtocolOpenInferenceGRPC, Model: "add"}
		}, `steps[1]: url: "grpc://127.0.0.1:2/v2/models/add": a gRPC step's URL is grpc://host:port, with no path or query`},
		{"a gRPC step with a metadataURL", func(c *config.Config) {
			c.Steps[1] = config.Step{Name: "add", URL: "grpc://127.0.0.1:2", Protocol: config.ProtocolOpenInferenceGRPC, Model: "add",
				MetadataURL: "http://127.0.0.1:2/m"}
		}, "steps[1]: metadataURL: only a step of protocol OpenInferenceProtocol has a metadataURL"},
		{"a model named by a REST step", func(c *config.Config) { c.Steps[1].Model = "add" },
			"steps[1]: model: only a step of protocol OpenInferenceProtocolGRPC names its model"},
		{"outputs without inputs", func(c *config.Config) {
			c.Steps = append(c.Steps, config.Step{Name: "last", URL: "http://127.0.0.1:1/", Protocol: config.ProtocolOpenInference,
				MetadataURL: "http://127.0.0.1:1/m", Outputs: []string{"y"}})
		}, "steps[2]: outputs: only a step with mapped inputs asks for outputs"},
		{"an input the step before does not ask for", func(c *config.Config) { c.Steps[0].Outputs = []string{"norm"} },
			`steps[1].inputs[0].tensor: step "scale" asks its model only for the outputs norm`},
		{"an answer's tensor the step does not ask for", func(c *config.Config) {
			c.Steps[0].Outputs = []string{"y"}
			c.Outputs = []config.TensorOutput{{Name: "norm", Step: "scale", Tensor: "norm"}}
		}, `outputs[0].tensor: step "scale" asks its model only for the outputs y`},
		{"an answer of no step", func(c *config.Config) { c.Outputs = []config.TensorOutput{{Name: "y", Step: "scal", Tensor: "y"}} },
			`outputs[0].step: "scal" is not a step`},
		{"an answer of a plain step", func(c *config.Config) {
			c.Steps = append(c.Steps, config.Step{Name: "plain", URL: "http://127.0.0.1:1/"})
			c.Outputs = []config.TensorOutput{{Name: "y", Step: "plain", Tensor: "y"}}
		}, `outputs[0].step: step "plain" has no model metadata`},
		{"an answer naming a tensor twice", func(c *config.Config) {
			c.Outputs = []config.TensorOutput{{Name: "y", Step: "scale", Tensor: "y"}, {Name: "y", Step: "add", Tensor: "sum"}}
		}, `outputs[1].name: "y" is in the answer twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Config{Steps: []config.Step{
				{Name: "scale", URL: "http://127.0.0.1:1/", Protocol: config.ProtocolOpenInference, MetadataURL: "http://127.0.0.1:1/m",
					Inputs: []config.TensorInput{{Name: "x", Tensor: "input0"}}},
				{Name: "add", URL: "http://127.0.0.1:2/", Protocol: config.ProtocolOpenInference, MetadataURL: "http://127.0.0.1:2/m",
					Inputs: []config.TensorInput{{Name: "a", Step: "scale", Tensor: "y"}, {Name: "b", Tensor: "input0"}}},
			}}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the valid configuration is refused: %v", err)
			}
			tc.edit(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestInferenceHeaderGoesWithItsBody(t *testing.T) {
	// Without mapping, each body is passed on with its own Inference-Header-Content-Length:
	// the caller's to the first step, the first step's to the second (propagateHeaders cannot
	// name the header: TestTheOpenInferenceBodyHeaderIsSetByTheRouter).
	var got atomic.Value
	first := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.Store(r.Header.Get("Inference-Header-Content-Length"))
		w.Header().Set("Inference-Header-Content-Length", "7")
		_, _ = io.WriteString(w, `{"a":1}binary`)
	})
	second := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Inference-Header-Content-Length", "2")
		_, _ = io.WriteString(w, "{}"+r.Header.Get("Inference-Header-Content-Length"))
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "first", URL: first.URL}, {Name: "second", URL: second.URL}}})
	a := post(t, tr.url, "application/octet-stream", `{"xy":2}x`, http.Header{"Inference-Header-Content-Length": {"8"}})
	if a.status != http.StatusOK || got.Load() != "8" || a.body != "{}7" || a.header.Get("Inference-Header-Content-Length") != "2" {
		t.Fatalf("answer %d %q (header %q), the first step got %q", a.status, a.body, a.header.Get("Inference-Header-Content-Length"), got.Load())
	}
	second.Close()
	third := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "["+r.Header.Get("Inference-Header-Content-Length")+"]")
	})
	tr = newTestRouter(t, config.Config{Steps: []config.Step{{Name: "first", URL: first.URL}, {Name: "third", URL: third.URL}}})
	if a := post(t, tr.url, "application/json", `{}`, nil); a.body != "[7]" {
		t.Fatalf("the second step got %q", a.body)
	}
}

func TestStopWhenRefusesATensorTooLargeToDecode(t *testing.T) {
	n := maxDecodedElements + 1
	head := fmt.Sprintf(`{"outputs":[{"name":"mask","shape":[%d],"datatype":"BOOL","parameters":{"binary_data_size":%d}}]}`, n, n)
	step := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Inference-Header-Content-Length", strconv.Itoa(len(head)))
		_, _ = io.WriteString(w, head+strings.Repeat("\x01", n))
	})
	// The buffer budget (4 × 4 MiB) holds the answer, not what decoding it would: the size is
	// refused first, as the tensors' error, not the budget's.
	tr := newTestRouter(t, config.Config{MaxBodyBytes: 4 << 20, Steps: []config.Step{{Name: "segment", URL: step.URL, Protocol: config.ProtocolOpenInference,
		StopWhen: `tensors.mask[0]`}}})
	a := post(t, tr.url, "application/json", jsonRequest, nil)
	if e := a.errorBody(t); a.status != http.StatusBadGateway || e.Reason != ReasonStopWhen ||
		e.Error != "the stopWhen condition of step 1 (segment) could not be evaluated: its answer's tensors could not be read" {
		t.Fatalf("answer %d: %+v", a.status, e)
	}
}

// tensorEchoStep answers an Open Inference Protocol request with its inputs as outputs.
func tensorEchoStep(t *testing.T) *stepServer {
	return newStep(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(bytes.Replace(b, []byte(`"inputs"`), []byte(`"outputs"`), 1))
	})
}

func TestMappedStepFitsInTwoBodies(t *testing.T) {
	// What the request is made of is released before the step is called: one request of about
	// half maxBodyBytes goes through a router that holds two bodies at most.
	echo := tensorEchoStep(t)
	tr := newTestRouter(t, config.Config{MaxBodyBytes: 1 << 20, MaxBufferedBytes: 2 << 20, Steps: []config.Step{{Name: "a", URL: echo.URL,
		Protocol: config.ProtocolOpenInference, MetadataURL: "http://127.0.0.1:1/m", Inputs: []config.TensorInput{{Name: "x", Tensor: "input0"}}}}})
	data := strings.TrimSuffix(strings.Repeat("1.5,", 140_000), ",")
	body := `{"inputs":[{"name":"input0","shape":[140000],"datatype":"FP32","data":[` + data + `]}]}`
	a := post(t, tr.url, "application/json", body, nil)
	if a.status != http.StatusOK || !strings.HasPrefix(a.body, `{"outputs":[{"name":"x"`) {
		t.Fatalf("answer %d %.200s", a.status, a.body)
	}
	eventually(t, "the budget is given back", func() bool { return tr.budget.Used() == 0 })
}

func TestStopWhenRefusesAnOutputNamedTwice(t *testing.T) {
	step := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"outputs":[{"name":"s","shape":[3],"datatype":"FP32","data":[1,2,3]},`+
			`{"name":"s","shape":[1],"datatype":"FP32","data":[4]}]}`)
	})
	tr := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "score", URL: step.URL, Protocol: config.ProtocolOpenInference,
		StopWhen: `size(tensors.s) > 0`}}})
	for range 3 {
		a := post(t, tr.url, "application/json", jsonRequest, nil)
		if e := a.errorBody(t); a.status != http.StatusBadGateway || e.Reason != ReasonStopWhen {
			t.Fatalf("answer %d: %+v", a.status, e)
		}
	}
	eventually(t, "the budget is given back", func() bool { return tr.budget.Used() == 0 })
}
