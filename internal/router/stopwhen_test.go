package router

import (
	"context"
	"strings"
	"testing"
)

func TestCompileStopWhen(t *testing.T) {
	for expr, want := range map[string]string{
		"size(response.faces) == 0":                     "",
		`status == 204 || headers["x-faces"] == "0"`:    "",
		`response.label.startsWith("cat")`:              "",
		"response.score > 0.5":                          "",
		"response.ok":                                   "", // dyn: checked at run time
		"size(response.faces) ==":                       "Syntax error",
		"nope == 1":                                     "undeclared reference to 'nope'",
		`"a string"`:                                    "must be a bool, it is string",
		strings.Repeat("x", MaxStopWhenLength+1) + "==": "at most 4096",
	} {
		_, err := CompileStopWhen(expr)
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
		in      StopWhenInput
		want    bool
		wantErr string
	}{
		{"size(response.faces) == 0", StopWhenInput{Response: map[string]any{"faces": []any{}}}, true, ""},
		{"size(response.faces) == 0", StopWhenInput{Response: map[string]any{"faces": []any{"f"}}}, false, ""},
		{"response.count == 0", StopWhenInput{Response: map[string]any{"count": 0.0}}, true, ""},
		{"response == null", StopWhenInput{}, true, ""},
		{`headers["x-faces"] == "0"`, StopWhenInput{Headers: map[string]string{"x-faces": "0"}}, true, ""},
		{"status == 204", StopWhenInput{Status: 204}, true, ""},
		{"size(response.faces) == 0", StopWhenInput{}, false, "no such"},
		{"has(response.faces) && size(response.faces) == 0", StopWhenInput{}, false, ""},
		{"response.ok", StopWhenInput{Response: map[string]any{"ok": "yes"}}, false, "bool"},
	} {
		sw, err := CompileStopWhen(tc.expr)
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
