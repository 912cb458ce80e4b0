package router

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// meeting lets its two callers through once both have arrived: two calls made one after the
// other never meet, and the first gives up after 10 s.
type meeting struct {
	arrived atomic.Int32
	both    chan struct{}
}

func newMeeting() *meeting { return &meeting{both: make(chan struct{})} }

func (m *meeting) wait(ctx context.Context) error {
	if m.arrived.Add(1) == 2 {
		close(m.both)
	}
	select {
	case <-m.both:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return errors.New("the other branch was not called meanwhile")
	}
}

// diamond is request → scale → left and right, both from scale's y → add, whose a is left's l
// (y + 1) and b right's r (10 × y): sum is 22 × input0 + 1.
type diamond struct {
	scale, left, right, add *modelServer
}

func newDiamond(t *testing.T) *diamond {
	unary := func(name, out string, f func(float32) float32) *modelServer {
		return newModelServer(t, name, 0, []modelTensor{{"v", "FP32", fp32x4}}, []modelTensor{{out, "FP32", fp32x4}},
			func(in map[string][]float32) map[string][]float32 {
				var o []float32
				for _, v := range in["v"] {
					o = append(o, f(v))
				}
				return map[string][]float32{out: o}
			})
	}
	return &diamond{
		scale: scaleModel(t, 0),
		left:  unary("left", "l", func(v float32) float32 { return v + 1 }),
		right: unary("right", "r", func(v float32) float32 { return 10 * v }),
		add:   addModel(t, "FP32"),
	}
}

func (d *diamond) config() config.Config {
	step := func(name string, m *modelServer, inputs ...config.TensorInput) config.Step {
		return config.Step{Name: name, URL: m.inferURL(), Protocol: config.ProtocolOpenInference,
			MetadataURL: m.metadataURL(), Inputs: inputs}
	}
	return config.Config{Steps: []config.Step{
		step("scale", d.scale, config.TensorInput{Name: "x", Tensor: "input0"}),
		step("left", d.left, config.TensorInput{Name: "v", Step: "scale", Tensor: "y"}),
		step("right", d.right, config.TensorInput{Name: "v", Step: "scale", Tensor: "y"}),
		step("add", d.add, config.TensorInput{Name: "a", Step: "left", Tensor: "l"},
			config.TensorInput{Name: "b", Step: "right", Tensor: "r"}),
	}}
}

// blockUntilCancelled makes m's calls wait until the router abandons them, after saying they
// arrived; cancelled counts the calls the router abandoned.
func blockUntilCancelled(m *modelServer, arrived chan<- struct{}, cancelled *atomic.Int32) {
	m.hold = func(r *http.Request) error {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			cancelled.Add(1)
			return r.Context().Err()
		case <-time.After(10 * time.Second):
			return errors.New("not cancelled")
		}
	}
}

// await waits for arrived, at most 10 s.
func await(r *http.Request, arrived <-chan struct{}) error {
	select {
	case <-arrived:
		return nil
	case <-r.Context().Done():
		return r.Context().Err()
	case <-time.After(10 * time.Second):
		return errors.New("the other branch was not called meanwhile")
	}
}

func TestGraphRunsIndependentStepsAtOnce(t *testing.T) {
	d := newDiamond(t)
	meet := newMeeting()
	d.left.hold = func(r *http.Request) error { return meet.wait(r.Context()) }
	d.right.hold = func(r *http.Request) error { return meet.wait(r.Context()) }
	tr := newTestRouter(t, d.config())

	a := post(t, tr.url, "application/json", jsonRequest, nil)
	if a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != "add" {
		t.Fatalf("answer %d from %q: %s", a.status, a.header.Get(config.HeaderLastStep), a.body)
	}
	if got, want := fmt.Sprint(outputsOf(t, a)["sum"]), "[23 45 67 89]"; got != want {
		t.Fatalf("sum = %s, want %s (22 × input0 + 1)", got, want)
	}
	for _, m := range []*modelServer{d.left, d.right} {
		if got := m.requests.Load().(string); !strings.Contains(got, `"name":"v"`) || !strings.Contains(got, "[2,4,6,8]") {
			t.Errorf("%s got %s, want scale's y as v", m.name, got)
		}
	}
	if got := tr.budget.Used(); got != 0 {
		t.Errorf("the router holds %d bytes after the request", got)
	}
}

func TestGraphBranchFailureCancelsTheOther(t *testing.T) {
	d := newDiamond(t)
	rightArrived := make(chan struct{}, 1)
	var cancelled atomic.Int32
	blockUntilCancelled(d.right, rightArrived, &cancelled)
	d.left.hold = func(r *http.Request) error {
		if err := await(r, rightArrived); err != nil {
			return err
		}
		return errors.New("left is broken")
	}
	tr := newTestRouter(t, d.config())

	a := post(t, tr.url, "application/json", jsonRequest, nil)
	e := a.errorBody(t)
	if a.status != http.StatusBadGateway || e.Step != "left" || e.StepIndex != 2 || e.Error != "step 2 (left) answered 500 Internal Server Error" {
		t.Fatalf("answer %d %s, want 502 naming step 2 (left)", a.status, a.body)
	}
	eventually(t, "right abandoned and every body released", func() bool {
		return cancelled.Load() == 1 && tr.counter(t, "errors", "right", ReasonCanceled) == 1 && tr.budget.Used() == 0
	})
	if got := d.add.requests.Load().(string); got != "" {
		t.Errorf("add was called after its branch failed: %s", got)
	}
}

func TestGraphStopOnABranch(t *testing.T) {
	d := newDiamond(t)
	rightArrived := make(chan struct{}, 1)
	var cancelled atomic.Int32
	blockUntilCancelled(d.right, rightArrived, &cancelled)
	d.left.hold = func(r *http.Request) error { return await(r, rightArrived) }
	cfg := d.config()
	cfg.Steps[1].StopWhen = `tensors.l[0] > 2.0`
	tr := newTestRouter(t, cfg)

	a := post(t, tr.url, "application/json", jsonRequest, nil)
	if a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != "left" {
		t.Fatalf("answer %d from %q, want 200 from left: %s", a.status, a.header.Get(config.HeaderLastStep), a.body)
	}
	if got, want := fmt.Sprint(outputsOf(t, a)["l"]), "[3 5 7 9]"; got != want {
		t.Fatalf("l = %s, want %s", got, want)
	}
	eventually(t, "right abandoned and every body released", func() bool {
		return cancelled.Load() == 1 && tr.budget.Used() == 0
	})
	if got := d.add.requests.Load().(string); got != "" {
		t.Errorf("add was called after the request stopped: %s", got)
	}
}

// A step with inputs waits only for what they name: one that maps only the request's tensors
// runs beside the steps before it, and a step without inputs still waits for the one before it.
func TestGraphStepOfTheRequestRunsAtOnce(t *testing.T) {
	d := newDiamond(t)
	meet := newMeeting()
	d.scale.hold = func(r *http.Request) error { return meet.wait(r.Context()) }
	d.left.hold = func(r *http.Request) error { return meet.wait(r.Context()) }
	echo := appendStep(t, "", "application/json", nil)
	cfg := d.config()
	cfg.Steps = []config.Step{cfg.Steps[0], cfg.Steps[1], {Name: "echo", URL: echo.URL}}
	cfg.Steps[1].Inputs = []config.TensorInput{{Name: "v", Tensor: "input0"}}
	tr := newTestRouter(t, cfg)

	a := post(t, tr.url, "application/json", jsonRequest, nil)
	if a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != "echo" {
		t.Fatalf("answer %d from %q: %s", a.status, a.header.Get(config.HeaderLastStep), a.body)
	}
	// echo got left's answer as it was (input0 + 1).
	if got, want := fmt.Sprint(outputsOf(t, a)["l"]), "[2 3 4 5]"; got != want {
		t.Fatalf("l = %s, want %s", got, want)
	}
}

// answerOutputs is the diamond answering left's l as plus_one and add's sum.
func (d *diamond) answerOutputs() config.Config {
	cfg := d.config()
	cfg.Pipeline = "team-a/faces"
	cfg.Outputs = []config.TensorOutput{{Name: "plus_one", Step: "left", Tensor: "l"}, {Name: "sum", Step: "add", Tensor: "sum"}}
	return cfg
}

func TestAnswerMadeOfOutputs(t *testing.T) {
	d := newDiamond(t)
	tr := newTestRouter(t, d.answerOutputs())
	if err := tr.CheckModels(context.Background()); err != nil {
		t.Fatal(err)
	}

	a := post(t, tr.url, "application/json", jsonRequest, nil)
	if a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != "add" || a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("answer %d from %q (%s): %s", a.status, a.header.Get(config.HeaderLastStep), a.header.Get("Content-Type"), a.body)
	}
	want := `{"model_name":"faces","outputs":[{"name":"plus_one","shape":[1,4],"datatype":"FP32","data":[3,5,7,9]},` +
		`{"name":"sum","shape":[1,4],"datatype":"FP32","data":[23,45,67,89]}]}`
	if a.body != want {
		t.Fatalf("answer\n%s\nwant\n%s", a.body, want)
	}

	// Binary tensors stay binary: the request's asks the steps for binary answers, and the
	// pipeline's answer carries their bytes after its JSON header.
	head := `{"inputs":[{"name":"input0","shape":[1,4],"datatype":"FP32","parameters":{"binary_data_size":16}}]}`
	var data bytes.Buffer
	for _, f := range []float32{1, 2, 3, 4} {
		_ = binary.Write(&data, binary.LittleEndian, f)
	}
	a = post(t, tr.url, "application/octet-stream", head+data.String(),
		http.Header{"Inference-Header-Content-Length": {strconv.Itoa(len(head))}})
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/octet-stream" || a.header.Get("Inference-Header-Content-Length") == "" {
		t.Fatalf("binary: answer %d (%s, header length %q): %q", a.status, a.header.Get("Content-Type"),
			a.header.Get("Inference-Header-Content-Length"), a.body)
	}
	if got := fmt.Sprint(outputsOf(t, a)); got != "map[plus_one:[3 5 7 9] sum:[23 45 67 89]]" {
		t.Fatalf("binary: outputs %s", got)
	}
	if got := tr.budget.Used(); got != 0 {
		t.Errorf("the router holds %d bytes after the requests", got)
	}
}

func TestAnswerOutputRefusedByMetadata(t *testing.T) {
	d := newDiamond(t)
	cfg := d.answerOutputs()
	cfg.Outputs[0].Tensor = "z"
	want := `output "plus_one" of the pipeline's answer: model left of step 2 (left) has no output "z" (its outputs: l)`
	if problems := refusedByMetadata(t, cfg); len(problems) != 1 || problems[0] != want {
		t.Fatalf("problems = %q, want [%q]", problems, want)
	}
}

func TestAnswerOutputMissingFromAStepAnswer(t *testing.T) {
	d := newDiamond(t)
	cfg := d.answerOutputs()
	// Not checked against the metadata (the router is not started): the answer lacks it.
	cfg.Outputs[1].Tensor = "total"
	tr := newTestRouter(t, cfg)

	a := post(t, tr.url, "application/json", jsonRequest, nil)
	e := a.errorBody(t)
	want := `output "sum" of the pipeline's answer: the answer of step 4 (add) has no tensor "total"`
	if a.status != http.StatusBadGateway || e.Error != want || e.Step != "add" || e.Reason != ReasonTensorMapping {
		t.Fatalf("answer %d %s, want 502 %q", a.status, a.body, want)
	}
	if got := tr.counter(t, "errors", "add", ReasonTensorMapping); got != 1 {
		t.Errorf("errors of add (tensor_mapping) = %v, want 1", got)
	}
	if got := tr.budget.Used(); got != 0 {
		t.Errorf("the router holds %d bytes after the request", got)
	}
}

// A stop on a step answers with that step's answer as it is, outputs or not.
func TestAnswerOfAStopIsTheStepsAnswer(t *testing.T) {
	d := newDiamond(t)
	cfg := d.answerOutputs()
	cfg.Steps[0].StopWhen = `tensors.norm[0] > 100.0`
	tr := newTestRouter(t, cfg)
	big := `{"inputs":[{"name":"input0","shape":[1,4],"datatype":"FP32","data":[100,2,3,4]}]}`
	a := post(t, tr.url, "application/json", big, nil)
	if a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != "scale" || !strings.Contains(a.body, `"model_name":"scale"`) {
		t.Fatalf("answer %d from %q: %s", a.status, a.header.Get(config.HeaderLastStep), a.body)
	}
}

// A step's request may name the outputs it asks for: its model answers those alone.
func TestStepAsksForItsOutputs(t *testing.T) {
	d := newDiamond(t)
	cfg := d.answerOutputs()
	cfg.Steps[0].Outputs = []string{"y"}
	cfg.Outputs = append(cfg.Outputs, config.TensorOutput{Name: "y", Step: "scale", Tensor: "y"})
	tr := newTestRouter(t, cfg)
	if err := tr.CheckModels(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := post(t, tr.url, "application/json", jsonRequest, nil)
	if a.status != http.StatusOK {
		t.Fatalf("answer %d: %s", a.status, a.body)
	}
	if got := d.scale.requests.Load().(string); !strings.Contains(got, `"outputs":[{"name":"y"}]`) {
		t.Fatalf("scale's request %s does not ask for y alone", got)
	}
	if got := fmt.Sprint(outputsOf(t, a)); got != "map[plus_one:[3 5 7 9] sum:[23 45 67 89] y:[2 4 6 8]]" {
		t.Fatalf("outputs %s", got)
	}

	cfg.Steps[0].Outputs = []string{"y", "nope"}
	want := `output "nope" asked for by step 1 (scale): model scale has no output "nope" (its outputs: y, norm)`
	if problems := refusedByMetadata(t, cfg); len(problems) != 1 || problems[0] != want {
		t.Fatalf("problems = %q, want [%q]", problems, want)
	}
}
