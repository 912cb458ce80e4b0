package stopwhen

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
)

func TestCompileStopWhen(t *testing.T) {
	for expr, want := range map[string]string{
		"size(response.faces) == 0":                  "",
		`status == 204 || headers["x-faces"] == "0"`: "",
		`response.label.startsWith("cat")`:           "",
		"response.score > 0.5":                       "",
		"response.ok":                                "", // dyn: checked at run time
		"size(response.faces) ==":                    "Syntax error",
		"nope == 1":                                  "undeclared reference to 'nope'",
		`"a string"`:                                 "must be a bool, it is string",
		strings.Repeat("x", MaxLength+1) + "==":      "at most 4096",
	} {
		_, err := Compile(expr)
		switch {
		case want == "" && err != nil:
			t.Errorf("%.40q: %v", expr, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%.40q: error %v, want %q", expr, err, want)
		}
	}
}

func TestStopWhenEval(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		in      Input
		want    bool
		wantErr string
	}{
		{"size(response.faces) == 0", Input{Response: map[string]any{"faces": []any{}}}, true, ""},
		{"size(response.faces) == 0", Input{Response: map[string]any{"faces": []any{"f"}}}, false, ""},
		{"response.count == 0", Input{Response: map[string]any{"count": 0.0}}, true, ""},
		{"response == null", Input{}, true, ""},
		{`headers["x-faces"] == "0"`, Input{Headers: map[string]string{"x-faces": "0"}}, true, ""},
		{"status == 204", Input{Status: 204}, true, ""},
		{"size(response.faces) == 0", Input{}, false, "no such"},
		{"has(response.faces) && size(response.faces) == 0", Input{}, false, ""},
		{"response.ok", Input{Response: map[string]any{"ok": "yes"}}, false, "bool"},
	} {
		sw, err := Compile(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sw.Eval(context.Background(), tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s on %+v: error %v, want %q", tc.expr, tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s on %+v: %v, %v; want %v", tc.expr, tc.in, got, err, tc.want)
		}
	}
}

// TestStopWhenReadsResponse checks which expressions get the decoded answer: every way of
// reading response does, and only an expression that cannot read it goes without.
func TestStopWhenReadsResponse(t *testing.T) {
	for expr, want := range map[string]bool{
		"size(response.items) == 0":                          true,
		"has(response.items)":                                true,
		`response["items"] == null`:                          true,
		".response.items == null":                            true,
		"response == null":                                   true,
		"[response][0] == null":                              true,
		"dyn(response).items == null":                        true,
		"[1].exists(x, x == 1) && response.ok":               true,
		"[1].exists(response, response == 1)":                true, // a comprehension's variable counts too
		`status == 204 || headers["x-faces"] == "0"`:         false,
		`headers.exists(k, k == "response")`:                 false,
		`"response" in headers`:                              false,
		"status == 200 && [1, 2].all(x, x > 0)":              false,
		`headers.exists(response, response == "x-response")`: true,
	} {
		sw, err := Compile(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if sw.readsResponse != want {
			t.Errorf("%s: readsResponse %v, want %v", expr, sw.readsResponse, want)
		}
	}
}

// TestStopWhenEvalHeaders checks that an expression sees the first value of each header by
// lower-case name, from the response's http.Header as from a map given.
func TestStopWhenEvalHeaders(t *testing.T) {
	for expr, want := range map[string]bool{
		`headers["x-faces"] == "0"`: true,
		`"X-Faces" in headers`:      false,
		`"x-faces" in headers`:      true,
		`size(headers) == 2`:        true,
		`!("x-empty" in headers)`:   true,
		`headers["content-type"] == "application/json" && headers["x-faces"] != "1"`: true,
	} {
		sw, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{"X-Faces": {"0", "1"}, "Content-Type": {"application/json"}, "X-Empty": {}}
		for _, in := range []Input{{Header: h}, {Headers: firstValues(h)}} {
			if got, err := sw.Eval(context.Background(), in); err != nil || got != want {
				t.Errorf("%s on %+v: %v, %v; want %v", expr, in, got, err, want)
			}
		}
	}
	// Neither: an empty map.
	sw, err := Compile("size(headers) == 0")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sw.Eval(context.Background(), Input{}); err != nil || !got {
		t.Errorf("size(headers) == 0 without headers: %v, %v", got, err)
	}
}

// TestStopWhenCost checks the cost limit: an expression whose work grows with its input runs
// under it and fails past it; one whose cost CEL bounds whatever the input runs without
// tracking, and costs, tracked, no more than that bound (plus its nodes) on a large input.
func TestStopWhenCost(t *testing.T) {
	// Each item costs about 4,000 to search: the limit is passed after about 250.
	long := strings.Repeat("x", 100<<10)
	items := make([]any, 400)
	for i := range items {
		items[i] = long
	}
	// Many short items: a cost tracker that grows with each iteration of a comprehension took
	// minutes over these before it stopped.
	many := make([]any, 400_000)
	for i := range many {
		many[i] = "item"
	}
	big := map[string]any{
		"items": items,
		"many":  many,
		"label": strings.Repeat("cat", 1<<20),
		"score": 0.4,
		"a":     map[string]any{"b": map[string]any{"c": 1.0}},
	}
	bigHeaders := map[string]string{"x-label": strings.Repeat("y", 1<<20)}
	for _, expr := range []string{
		`response.items.exists(x, x.contains("nope"))`,
		`response.items.all(x, x.matches("^x+$")) && response.items.all(x, x.endsWith("y"))`,
		`response.many.all(x, x.startsWith("it"))`,
	} {
		sw, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		if !sw.costTracked {
			t.Errorf("%s: runs without cost tracking, but its work grows with its input", expr)
		}
		if _, err := sw.Eval(context.Background(), Input{Response: big, Headers: bigHeaders}); err == nil ||
			!strings.Contains(err.Error(), "cost limit exceeded") {
			t.Errorf("%s on a large response: error %v, want the cost limit exceeded", expr, err)
		}
	}
	// A caller gone away ends work that grows with the answer before its cost limit does.
	sw, err := Compile(`response.many.all(x, x.startsWith("it"))`)
	if err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sw.Eval(gone, Input{Response: big}); !errors.Is(err, context.Canceled) {
		t.Errorf("%s after the caller went away: error %v, want it interrupted", sw, err)
	}

	env, err := celEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, expr := range []string{
		"size(response.items) == 0",
		"response.score < 0.5",
		`response.label == "cat"`,
		`headers["x-label"] == "y"`,
		`response.items[0] == "item"`,
		"response.a.b.c == 1.0",
		"has(response.done) && response.done == true",
		"status >= 500 || size(response) == 0",
	} {
		sw, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		if sw.costTracked {
			t.Errorf("%s: tracked, but CEL bounds its cost", expr)
		}
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		est, err := env.EstimateCost(ast, unknownSizes{})
		if err != nil {
			t.Fatal(err)
		}
		nodes := exprNodes(ast)
		tracked, err := env.Program(ast, cel.EvalOptions(cel.OptTrackCost))
		if err != nil {
			t.Fatal(err)
		}
		_, details, _ := tracked.Eval(map[string]any{"response": big, "headers": bigHeaders, "status": 200})
		if cost := details.ActualCost(); cost == nil || *cost > est.Max+nodes {
			t.Errorf("%s: tracked cost on a large input %v, above CEL's bound %d plus %d nodes", expr, cost, est.Max, nodes)
		}
	}
}
