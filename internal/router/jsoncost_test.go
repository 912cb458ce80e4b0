package router

import (
	"net/http"
	"strings"
	"testing"
)

func TestJSONDecodeCostCountsValuesOutsideStrings(t *testing.T) {
	for _, tc := range []struct {
		doc    string
		values int64
	}{
		{`1`, 1},
		{`[1,2,3]`, 4},
		{`{"a":1,"b":[true,null]}`, 7},
		{`"a,b:{c[d"`, 1},
		{`["\",", ","]`, 3},
	} {
		if got, want := jsonDecodeCost([]byte(tc.doc)), 2*int64(len(tc.doc))+jsonValueBytes*tc.values; got != want {
			t.Errorf("jsonDecodeCost(%s) = %d, want %d (%d values)", tc.doc, got, want, tc.values)
		}
	}
}

// TestRouterHoldsTheDecodedStopWhenDocumentInTheBudget checks that a JSON answer whose decoded
// form would not fit the buffer budget is refused with 503, not decoded beyond the budget.
func TestRouterHoldsTheDecodedStopWhenDocumentInTheBudget(t *testing.T) {
	// 1000 bytes of JSON, 500 values: about 33 000 bytes decoded, over a budget of 2100.
	many := jsonStep(t, "["+strings.TrimSuffix(strings.Repeat("1,", 500), ",")+"]")
	few := jsonStep(t, `{"faces": []}`)
	tr := newTestRouter(t, Config{Steps: []Step{
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
	tr2 := newTestRouter(t, Config{Steps: []Step{{Name: "few", URL: few.URL, StopWhen: "size(response.faces) == 0"}},
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
	tr := newTestRouter(t, Config{Steps: []Step{
		{Name: "many", URL: many.URL, StopWhen: `status == 200 && headers["content-type"] == "application/json"`},
	}, MaxBodyBytes: 1024, MaxBufferedBytes: 2100})
	if a := post(t, tr.url, "", "in", nil); a.status != http.StatusOK || a.header.Get(HeaderLastStep) != "many" {
		t.Errorf("answer %d %q, want the step's", a.status, a.body)
	}
	// The same answer for an expression that reads it is refused.
	tr2 := newTestRouter(t, Config{Steps: []Step{
		{Name: "many", URL: many.URL, StopWhen: `status == 200 && response != null`},
	}, MaxBodyBytes: 1024, MaxBufferedBytes: 2100})
	if a := post(t, tr2.url, "", "in", nil); a.status != http.StatusServiceUnavailable {
		t.Errorf("answer %d %q, want 503", a.status, a.body)
	}
}

// costByStates is jsonDecodeCost as a state machine over every byte: the reference the
// faster scan is checked against.
func costByStates(doc []byte) int64 {
	values := int64(1)
	inString, escaped := false, false
	for _, c := range doc {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ',' || c == ':' || c == '{' || c == '[':
			values++
		}
	}
	return jsonBytesFactor*int64(len(doc)) + jsonValueBytes*values
}

// FuzzJSONDecodeCost checks jsonDecodeCost against costByStates on any bytes, JSON or not.
func FuzzJSONDecodeCost(f *testing.F) {
	for _, doc := range []string{`1`, `[1,2,3]`, `{"a":1,"b":[true,null]}`, `"a,b:{c[d"`, `["\",", ","]`,
		`"\\",1`, `"\\\",1"`, `"\`, `"`, `",`, `{"a\\":{"b":"\\\\\"[,"}}`, `\\",[`} {
		f.Add([]byte(doc))
	}
	f.Add(benchDocument())
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, want := jsonDecodeCost(doc), costByStates(doc); got != want {
			t.Errorf("jsonDecodeCost(%q) = %d, want %d", doc, got, want)
		}
	})
}
