package router

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ndsl-cn/pipeline-operator/internal/router/config"
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
	if got := tr.budget.used.Load(); got != 0 {
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
