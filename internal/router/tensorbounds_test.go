package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
)

func TestTensorBoundsDefaultsAreTheReaders(t *testing.T) {
	if config.DefaultMaxTensors != oip.DefaultMaxTensors || config.DefaultMaxTensorRank != oip.DefaultMaxRank {
		t.Fatalf("the configuration's defaults (%d tensors, rank %d) are not the reader's (%d, %d)",
			config.DefaultMaxTensors, config.DefaultMaxTensorRank, oip.DefaultMaxTensors, oip.DefaultMaxRank)
	}
}

// mappedStep is a step whose model's inputs are mapped from the pipeline's request: a server
// that is never called, since each request below is refused before.
func mappedStep(inputs ...config.TensorInput) config.Step {
	return config.Step{Name: "scale", URL: "http://127.0.0.1:1/v2/models/scale/infer", Protocol: config.ProtocolOpenInference,
		MetadataURL: "http://127.0.0.1:1/v2/models/scale", Inputs: inputs}
}

// serveDirect runs one request through r, without a connection, and reports the answer and
// what serving it allocated on the heap.
func serveDirect(t *testing.T, r *Router, body []byte, header http.Header) (*httptest.ResponseRecorder, uint64) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	return rec, after.TotalAlloc - before.TotalAlloc
}

func newDirectRouter(t *testing.T, cfg config.Config) *Router {
	t.Helper()
	r, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRequestsOverTheTensorBoundsAreRefusedWithinTheirSize checks the bodies that grew most when
// read: 24 MiB of tiny tensors, or of one shape, are refused with 400 naming the bound, and
// serving them allocates a small multiple of their size (the body, and its copy in one piece).
// Read whole, the first took 766 MiB more of the heap.
func TestRequestsOverTheTensorBoundsAreRefusedWithinTheirSize(t *testing.T) {
	const size = 24 << 20
	var tiny bytes.Buffer
	tiny.WriteString(`{"inputs":[`)
	for tiny.Len() < size {
		tiny.WriteString(`{"name":"t","shape":[1],"datatype":"FP32","data":[0]},`)
	}
	tiny.WriteString(`{"name":"input0","shape":[1],"datatype":"FP32","data":[0]}]}`)
	var shape bytes.Buffer
	shape.WriteString(`{"inputs":[{"name":"input0","shape":[`)
	for shape.Len() < size {
		shape.WriteString("1,1,1,1,1,1,1,1,")
	}
	shape.WriteString(`1],"datatype":"FP32","data":[0]}]}`)

	r := newDirectRouter(t, config.Config{Steps: []config.Step{mappedStep(config.TensorInput{Name: "x", Tensor: "input0"})}})
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"tiny tensors", tiny.Bytes(),
			`input "x" of step 1 (scale): the pipeline's request has more than 1024 tensors (maxTensors)`},
		{"a long shape", shape.Bytes(),
			`input "x" of step 1 (scale): the pipeline's request has a tensor whose shape has more than 32 dimensions (maxTensorRank)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, allocated := serveDirect(t, r, tc.body, nil)
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusBadRequest ||
				e.Error != tc.want || e.Reason != ReasonBadRequest {
				t.Errorf("answer %d %s, want 400 %q", rec.Code, rec.Body, tc.want)
			}
			if limit := 3 * uint64(len(tc.body)); allocated > limit {
				t.Errorf("serving a body of %d bytes allocated %d, more than %d (3 × the body)", len(tc.body), allocated, limit)
			}
			if used := r.budget.Used(); used != 0 {
				t.Errorf("%d bytes still counted in the budget", used)
			}
		})
	}
}

// TestTensorBoundsAreConfigured checks maxTensors and maxTensorRank: the pipeline's request over
// them is the caller's error, a step's answer over them its own, and stopWhen does not read it.
func TestTensorBoundsAreConfigured(t *testing.T) {
	tensor := func(name string, rank int) string {
		return fmt.Sprintf(`{"name":%q,"shape":[%s],"datatype":"FP32","data":[0]}`, name, strings.TrimSuffix(strings.Repeat("1,", rank), ","))
	}
	body := func(list string, tensors ...string) string {
		return `{"` + list + `":[` + strings.Join(tensors, ",") + `]}`
	}
	r := newDirectRouter(t, config.Config{MaxTensors: 2, MaxTensorRank: 3,
		Steps: []config.Step{mappedStep(config.TensorInput{Name: "x", Tensor: "input0"})}})
	for _, tc := range []struct {
		body string
		want string
	}{
		{body("inputs", tensor("a", 1), tensor("input0", 3), tensor("c", 1)),
			`input "x" of step 1 (scale): the pipeline's request has more than 2 tensors (maxTensors)`},
		{body("inputs", tensor("input0", 4)),
			`input "x" of step 1 (scale): the pipeline's request has a tensor whose shape has more than 3 dimensions (maxTensorRank)`},
	} {
		rec, _ := serveDirect(t, r, []byte(tc.body), nil)
		if e := (answer{status: rec.Code, body: rec.Body.String()}).errorBody(t); rec.Code != http.StatusBadRequest || e.Error != tc.want {
			t.Errorf("answer %d %q, want 400 %q", rec.Code, e.Error, tc.want)
		}
	}

	// A step's answer over the bound: the step that maps it, or reads it in stopWhen, fails.
	three := body("outputs", tensor("y", 1), tensor("z", 1), tensor("w", 1))
	over := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, three)
	})
	mapped := config.Config{MaxTensors: 2, Steps: []config.Step{
		{Name: "first", URL: over.URL, Protocol: config.ProtocolOpenInference, MetadataURL: over.URL},
		{Name: "second", URL: "http://127.0.0.1:1/", Protocol: config.ProtocolOpenInference, MetadataURL: "http://127.0.0.1:1/m",
			Inputs: []config.TensorInput{{Name: "x", Step: "first", Tensor: "y"}}},
	}}
	stops := config.Config{MaxTensors: 2, Steps: []config.Step{
		{Name: "first", URL: over.URL, Protocol: config.ProtocolOpenInference, StopWhen: "size(tensors) > 0"},
	}}
	for _, tc := range []struct {
		cfg            config.Config
		reason, status string
		want           string
	}{
		{mapped, ReasonTensorMapping, "502", `input "x" of step 2 (second): the answer of step 1 (first) has more than 2 tensors (maxTensors)`},
		{stops, ReasonStopWhen, "502", `the stopWhen condition of step 1 (first) could not be evaluated: its answer has more than 2 tensors (maxTensors)`},
	} {
		tr := newTestRouter(t, tc.cfg)
		a := post(t, tr.url, "application/json", jsonRequest, nil)
		if e := a.errorBody(t); strconv.Itoa(a.status) != tc.status || e.Reason != tc.reason || e.Error != tc.want {
			t.Errorf("answer %d %q (%s), want %s %q (%s)", a.status, e.Error, e.Reason, tc.status, tc.want, tc.reason)
		}
		eventually(t, "the budget is given back", func() bool { return tr.budget.Used() == 0 })
	}
}

// TestTheMappedRequestIsChargedAsItIsWritten checks that a step's request, made of the tensors
// it maps, is counted in the budget as it is written: one that does not fit is refused before
// it is made whole.
func TestTheMappedRequestIsChargedAsItIsWritten(t *testing.T) {
	// The request's tensor is mapped to eight inputs: the step's request holds its data eight
	// times, which the budget cannot hold.
	data := strings.TrimSuffix(strings.Repeat("1.5,", 1<<20), ",")
	body := []byte(`{"inputs":[{"name":"input0","shape":[1048576],"datatype":"FP32","data":[` + data + `]}]}`)
	limit := int64(len(body)) + 64<<10
	var inputs []config.TensorInput
	for _, name := range strings.Split("abcdefgh", "") {
		inputs = append(inputs, config.TensorInput{Name: name, Tensor: "input0"})
	}
	cfg := config.Config{MaxBodyBytes: limit, MaxBufferedBytes: 5 * limit / 2, Steps: []config.Step{mappedStep(inputs...)}}
	r := newDirectRouter(t, cfg)
	rec, allocated := serveDirect(t, r, body, nil)
	var e errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusServiceUnavailable || e.Reason != ReasonBufferBudget {
		t.Fatalf("answer %d %s, want 503 for the buffer budget", rec.Code, rec.Body)
	}
	// The body, its copy in one piece, and at most the budget of the request's blocks: made
	// whole first, the request alone would have taken eight times the body.
	if max := uint64(cfg.MaxBufferedBytes) + 2*uint64(len(body)); allocated > max {
		t.Errorf("a refused request of a body of %d bytes allocated %d, more than %d", len(body), allocated, max)
	}
	if used := r.budget.Used(); used != 0 {
		t.Errorf("%d bytes still counted in the budget", used)
	}
}

// TestStopWhenDistinctOfAnAnswerIsRefusedBeforeItRuns checks a stopWhen whose distinct() over an
// answer's 32,768 elements would cost far more than the limit: it is refused before it runs
// (it ran for 10 s, past the request's deadline of 2 s, before the cost limit ended it).
func TestStopWhenDistinctOfAnAnswerIsRefusedBeforeItRuns(t *testing.T) {
	const n = 32768
	var data strings.Builder
	for i := range n {
		if i > 0 {
			data.WriteByte(',')
		}
		data.WriteString(strconv.Itoa(i))
	}
	answerBody := fmt.Sprintf(`{"outputs":[{"name":"ids","shape":[%d],"datatype":"INT64","data":[%s]}]}`, n, data.String())
	step := newStep(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answerBody)
	})
	tr, log := newLoggedTestRouter(t, config.Config{RequestTimeoutSeconds: 2, Steps: []config.Step{{Name: "rank", URL: step.URL,
		Protocol: config.ProtocolOpenInference, StopWhen: "size(tensors.ids.distinct()) < 10"}}})
	a := post(t, tr.url, "application/json", jsonRequest, nil)
	if e := a.errorBody(t); a.status != http.StatusBadGateway || e.Reason != ReasonStopWhen {
		t.Fatalf("answer %d %+v, want 502 for stopWhen", a.status, e)
	}
	if !strings.Contains(log.String(), "cost limit exceeded: distinct() of these arguments costs") {
		t.Fatalf("the log does not say distinct() was refused before it ran:\n%s", log)
	}
}
