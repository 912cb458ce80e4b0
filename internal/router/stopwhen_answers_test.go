package router

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
)

// TestRouterHoldsTheDecodedStopWhenDocumentInTheBudget checks that a JSON answer whose decoded
// form would not fit the buffer budget is refused with 503, not decoded beyond the budget.
func TestRouterHoldsTheDecodedStopWhenDocumentInTheBudget(t *testing.T) {
	// 1000 bytes of JSON, 500 values: about 33 000 bytes decoded, over a budget of 2100.
	many := jsonStep(t, "["+strings.TrimSuffix(strings.Repeat("1,", 500), ",")+"]")
	few := jsonStep(t, `{"faces": []}`)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{
		{Name: "many", URL: many.URL, StopWhen: "size(response) == 0"},
		{Name: "few", URL: few.URL, StopWhen: "size(response.faces) == 0"},
	}, MaxBodyBytes: 1024, MaxBufferedBytes: 2100})
	a := post(t, tr.url, "", "in", nil)
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "1" {
		t.Fatalf("answer %d (Retry-After %q) %q, want 503 with Retry-After: 1", a.status, a.header.Get("Retry-After"), a.body)
	}
	if e := a.errorBody(t); e.Step != "many" || e.Reason != ReasonBufferBudget {
		t.Errorf("error body %+v, want step many, reason %s", e, ReasonBufferBudget)
	}
	if few.calls.Load() != 0 {
		t.Error("the next step was called")
	}
	if got := tr.budget.Used(); got != 0 {
		t.Errorf("%d buffered bytes still counted", got)
	}
	// A small document is decoded and evaluated within the same budget.
	tr2 := newTestRouter(t, config.Config{Steps: []config.Step{{Name: "few", URL: few.URL, StopWhen: "size(response.faces) == 0"}},
		MaxBodyBytes: 1024, MaxBufferedBytes: 2100})
	if a := post(t, tr2.url, "", "in", nil); a.status != http.StatusOK || a.body != `{"faces": []}` {
		t.Errorf("a small JSON answer: %d %q", a.status, a.body)
	}
}

// TestRouterDoesNotDecodeForAnExpressionWithoutResponse checks that an answer is neither
// decoded nor held in the budget for an expression that does not read response: the JSON
// answer that would not fit (above) passes.
func TestRouterDoesNotDecodeForAnExpressionWithoutResponse(t *testing.T) {
	many := jsonStep(t, "["+strings.TrimSuffix(strings.Repeat("1,", 500), ",")+"]")
	tr := newTestRouter(t, config.Config{Steps: []config.Step{
		{Name: "many", URL: many.URL, StopWhen: `status == 200 && headers["content-type"] == "application/json"`},
	}, MaxBodyBytes: 1024, MaxBufferedBytes: 2100})
	if a := post(t, tr.url, "", "in", nil); a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != "many" {
		t.Errorf("answer %d %q, want the step's", a.status, a.body)
	}
	// The same answer for an expression that reads it is refused.
	tr2 := newTestRouter(t, config.Config{Steps: []config.Step{
		{Name: "many", URL: many.URL, StopWhen: `status == 200 && response != null`},
	}, MaxBodyBytes: 1024, MaxBufferedBytes: 2100})
	if a := post(t, tr2.url, "", "in", nil); a.status != http.StatusServiceUnavailable {
		t.Errorf("answer %d %q, want 503", a.status, a.body)
	}
}

// TestStopWhenReadsAnAnswerOfSeveralBlocks evaluates stopWhen on a JSON answer longer than a
// block, which the router joins before decoding it.
func TestStopWhenReadsAnAnswerOfSeveralBlocks(t *testing.T) {
	doc := `{"items":["` + strings.Repeat("x", 3*bodies.BlockBytes) + `"]}`
	first := jsonStep(t, doc)
	second := appendStep(t, "|2", "text/plain", nil)
	tr := newTestRouter(t, config.Config{Steps: []config.Step{
		{Name: "one", URL: first.URL, StopWhen: "size(response.items) == 1"},
		{Name: "two", URL: second.URL},
	}})
	a := post(t, tr.url, "application/json", "{}", nil)
	if a.status != http.StatusOK || a.header.Get(config.HeaderLastStep) != "one" || a.body != doc {
		t.Fatalf("answer %d from %q, %d bytes; want the first step's answer of %d bytes", a.status,
			a.header.Get(config.HeaderLastStep), len(a.body), len(doc))
	}
	if got := second.calls.Load(); got != 0 {
		t.Errorf("the second step was called %d times", got)
	}
	// The answer is released once written: the caller may have read it a moment before.
	eventually(t, "the budget is free", func() bool { return tr.budget.Used() == 0 })
}

// TestStopsJoinsTheAnswerItDecodes has stopWhen join the JSON answer of a step whose expression
// reads response, within the budget, and leave other answers in their blocks.
func TestStopsJoinsTheAnswerItDecodes(t *testing.T) {
	tr := newTestRouter(t, config.Config{Steps: []config.Step{
		{Name: "stops", URL: "http://127.0.0.1:1/", StopWhen: "response == null"},
		{Name: "plain", URL: "http://127.0.0.1:2/"},
		{Name: "on-status", URL: "http://127.0.0.1:3/", StopWhen: "status == 299"},
	}})
	stops, plain, onStatus := tr.steps[0], tr.steps[1], tr.steps[2]
	// The answer, of unknown length, is read into three blocks, which it holds of the budget
	// until joined: then it holds one slice of its length.
	const length = 2*bodies.BlockBytes + 2
	answer := func(bg *bodies.Budget, contentType string) *stepResponse {
		body, err := bodies.Read(strings.NewReader(`"`+strings.Repeat("x", length-2)+`"`), -1, 1<<20, bg)
		if err != nil {
			t.Fatal(err)
		}
		return &stepResponse{payload: payload{body: body, contentType: contentType}, status: http.StatusOK}
	}
	const joined, inBlocks = length, 3 * bodies.BlockBytes
	bg := bodies.NewBudget(1 << 20)
	for _, tc := range []struct {
		step        *step
		contentType string
		held        int64
	}{
		{stops, "application/json", joined},
		{stops, "text/plain", inBlocks},
		{plain, "application/json", inBlocks},
		{onStatus, "application/json", inBlocks},
	} {
		resp := answer(bg, tc.contentType)
		if _, f := tc.step.stops(t.Context(), resp, oip.Reader{Budget: bg}); f != nil {
			t.Fatalf("%s, %s: %v", tc.step.name, tc.contentType, f)
		}
		if got := bg.Used(); got != tc.held {
			t.Errorf("%s, %s: the answer holds %d bytes, want %d (joined %d, in blocks %d)",
				tc.step.name, tc.contentType, got, tc.held, joined, inBlocks)
		}
		resp.body.Release()
	}
	// Room for the answer in blocks, not for its copy too.
	tight := bodies.NewBudget(3*bodies.BlockBytes + bodies.BlockBytes/2)
	resp := answer(tight, "application/json")
	_, f := stops.stops(t.Context(), resp, oip.Reader{Budget: tight})
	if f == nil || f.reason != ReasonBufferBudget || f.status != http.StatusServiceUnavailable {
		t.Fatalf("a join over the budget: %+v, want a 503 for the buffer budget", f)
	}
	resp.body.Release()
	if used := tight.Used() + bg.Used(); used != 0 {
		t.Errorf("%d bytes still counted", used)
	}
}
