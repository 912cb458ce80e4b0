package plugin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hostile is text a tenant's container can leave in a termination message or its log, or write
// into anything the plugin prints: a clipboard write (OSC 52, ended by BEL), a window title
// (OSC 0), a screen clear and cursor moves (CSI), a carriage return that writes over the line,
// a CSI as the C1 control U+009B in UTF-8, bytes that are not UTF-8, a right-to-left override,
// DEL and a line separator.
const hostile = "crashed \x1b]52;c;Y3VybCBldmlsLnNofHNo\a\x1b]0;root@prod\x07 \x1b[2J\x1b[1;1Hhidden over\rwrite " +
	"\u009b31mred\u009b0m \xff\xfe bad \u202egnp.exe\u202c del\x7f sep\u2028end"

// visible are pieces of hostile a reader must still see.
var visible = []string{"crashed", "Y3VybCBldmlsLnNofHNo", "root@prod", "hidden over", "write", "31mred", "bad", "gnp.exe", "del", "sep", "end"}

// assertTerminalSafe fails when out holds a character a terminal acts on: a C0 control other
// than tab and line feed, DEL, a C1 control, a bidirectional control, a line separator, or
// bytes that are not UTF-8. what names the output.
func assertTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s is not UTF-8:\n%q", what, out)
	}
	for i, r := range out {
		if (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f || unsafeRune(r) {
			t.Errorf("%s holds %U at byte %d:\n%q", what, r, i, out)
			return
		}
	}
}

// assertVisible fails unless out holds each of visible, the text of hostile.
func assertVisible(t *testing.T, what, out string) {
	t.Helper()
	for _, v := range visible {
		if !strings.Contains(out, v) {
			t.Errorf("%s lost %q of the text:\n%s", what, v, out)
		}
	}
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want, lines string }{
		{"plain text, tab\tand ünïcödé 模型 ✓", "plain text, tab\tand ünïcödé 模型 ✓", ""},
		{"\x1b]52;c;aGk=\a", `\x1b]52;c;aGk=\a`, ""},
		{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`, ""},
		{"over\rwrite", `over\rwrite`, ""},
		{"a\nb\r\nc", `a\nb\r\nc`, "a\nb\\r\nc"},
		{"\u009b31m", `\u009b31m`, ""},
		{"\u0085next line", `\u0085next line`, ""},
		{"bad \xff\xfe utf-8", `bad \xff\xfe utf-8`, ""},
		{"\u202egnp.exe", `\u202egnp.exe`, ""},
		{"\u2066isolate\u2069", `\u2066isolate\u2069`, ""},
		{"line\u2028sep", `line\u2028sep`, ""},
		{"nul\x00 del\x7f bell\a", `nul\x00 del\x7f bell\a`, ""},
		{"", "", ""},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
		lines := cmp.Or(tc.lines, tc.want)
		if got := PrintableLines(tc.in); got != lines {
			t.Errorf("PrintableLines(%q) = %q, want %q", tc.in, got, lines)
		}
	}
	out := Printable(hostile)
	assertTerminalSafe(t, "Printable(hostile)", out)
	assertVisible(t, "Printable(hostile)", out)
	if strings.Contains(out, "\n") {
		t.Errorf("Printable kept a line feed: %q", out)
	}
}

// fillStrings sets every string reachable from v (fields, slices, pointers) to s, making
// slices of one element and pointers where they are nil.
func fillStrings(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillStrings(v.Elem(), s)
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		for i := range v.Len() {
			fillStrings(v.Index(i), s)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return
		}
		for i := range v.NumField() {
			fillStrings(v.Field(i), s)
		}
	}
}

// allStrings are every string reachable from v.
func allStrings(v reflect.Value) []string {
	switch v.Kind() {
	case reflect.String:
		return []string{v.String()}
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return allStrings(v.Elem())
	case reflect.Slice:
		var out []string
		for i := range v.Len() {
			out = append(out, allStrings(v.Index(i))...)
		}
		return out
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			out = append(out, allStrings(v.Field(i))...)
		}
		return out
	}
	return nil
}

// Every string of the summary, those of fields added later included, is escaped for the tree,
// and the summary given is left as it was.
func TestPrintablePipelineEscapesEveryString(t *testing.T) {
	var p Pipeline
	fillStrings(reflect.ValueOf(&p), hostile)
	got := printablePipeline(p)
	for _, s := range allStrings(reflect.ValueOf(got)) {
		if s != Printable(hostile) {
			t.Errorf("a string of the summary is %q, want it escaped", s)
		}
	}
	for _, s := range allStrings(reflect.ValueOf(p)) {
		if s != hostile {
			t.Fatalf("printablePipeline changed the summary it was given: %q", s)
		}
	}
}

// hostileFaces is testdata/pipeline-v1.yaml with hostile text wherever the tree prints what the
// cluster holds: a condition's reason and message, a step's state, reason and message, its
// node and the router's state.
func hostileFaces(t *testing.T) Pipeline {
	p := faces(t)
	p.Conditions[0].Reason, p.Conditions[0].Message = "Bad\x1b[31m", hostile
	p.Steps[1].State, p.Steps[1].Reason, p.Steps[1].Message = "Failed", "CrashLoopBackOff", "pod faces-recognise-1: "+hostile
	p.Steps[1].Node = "edge-c\x1b]0;x\a"
	p.Router.State = "Available\u009b2J"
	return p
}

func TestRenderEscapes(t *testing.T) {
	p := hostileFaces(t)
	plain := render(t, []Pipeline{p}, false)
	assertTerminalSafe(t, "the tree", plain)
	assertVisible(t, "the tree", plain)
	for _, want := range []string{`Bad\x1b[31m: `, `edge-c\x1b]0;x\a`, `Available\u009b2J`, `over\rwrite`, `\xff\xfe`} {
		if !strings.Contains(plain, want) {
			t.Errorf("the tree lacks %q:\n%s", want, plain)
		}
	}
	// Coloured, the only escape sequences are the tree's own colours.
	colored := render(t, []Pipeline{p}, true)
	stripped := strings.NewReplacer(colorReset, "", colorRed, "", colorGreen, "", colorYellow, "", colorBold, "").Replace(colored)
	if stripped != plain {
		t.Errorf("the coloured tree differs from the plain one by more than colours:\n%s\n%s", stripped, plain)
	}
}

// The Pipeline's events give the tree only a time: their text is not printed.
func TestEventsEscape(t *testing.T) {
	p := mustMap(t, fixture(t, "pipeline-v1.yaml"), VersionV1)
	at := time.Date(2026, 11, 20, 10, 1, 30, 0, time.UTC)
	SetFallbackSince(&p, []corev1.Event{{
		Reason:        eventFailedOver,
		Message:       "Step 1 (detect) " + hostile + " moved from node edge-a to node edge-b",
		LastTimestamp: metav1.NewTime(at),
	}})
	if p.Steps[0].FallbackSince == nil || !p.Steps[0].FallbackSince.Equal(at) {
		t.Fatalf("since %v, want %v from the event", p.Steps[0].FallbackSince, at)
	}
	out := render(t, []Pipeline{p}, false)
	assertTerminalSafe(t, "the tree", out)
	if !strings.Contains(out, "since 2026-11-20T10:01:30Z") || strings.Contains(out, "crashed") {
		t.Errorf("the tree shows more of the event than its time:\n%s", out)
	}
}

// The JSON document holds the strings as the cluster does: what a terminal acts on is escaped
// in it, as encoding/json does for C0 controls and the plugin for DEL, C1 and bidirectional
// controls, and it decodes back to the same strings (bytes that are not UTF-8 as U+FFFD).
func TestDocumentJSONEscapes(t *testing.T) {
	p := hostileFaces(t)
	var b bytes.Buffer
	if err := WriteDocument(&b, []Pipeline{p}); err != nil {
		t.Fatal(err)
	}
	assertTerminalSafe(t, "the JSON document", b.String())
	for _, want := range []string{`\u001b]52;c;`, `\u0007`, `over\rwrite`, `\u009b31m`, `\ufffd\ufffd bad`, `\u202egnp.exe`, `del\u007f`, `sep\u2028end`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the JSON document lacks %s:\n%s", want, b.String())
		}
	}
	var doc Document
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(hostile, "\xff\xfe", "\ufffd\ufffd", 1); doc.Items[0].Conditions[0].Message != want {
		t.Errorf("decoded message %q, want %q", doc.Items[0].Conditions[0].Message, want)
	}
	if got := doc.Items[0].Router.State; got != p.Router.State {
		t.Errorf("decoded router state %q, want %q", got, p.Router.State)
	}
	// Without anything to escape, the document is what encoding/json writes.
	b.Reset()
	plain := faces(t)
	if err := WriteDocument(&b, []Pipeline{plain}); err != nil {
		t.Fatal(err)
	}
	want, _ := json.MarshalIndent(NewDocument([]Pipeline{plain}), "", "  ")
	if b.String() != string(want)+"\n" {
		t.Errorf("document:\n%s\nwant\n%s", b.String(), want)
	}
}

func TestStepLogsEscape(t *testing.T) {
	ls, s := newLogServer(t)
	ls.logs["faces-detect-a"] = []string{"2026-11-20T10:00:00.1Z " + hostile, "2026-11-20T10:00:00.2Z windows line\r"}
	ctx := context.Background()
	for _, o := range []LogOptions{{Tail: -1}, {Tail: -1, Follow: true}} {
		var out, errOut bytes.Buffer
		if err := s.StepLogs(ctx, &out, &errOut, []corev1.Pod{ls.pods[1], ls.pods[0]}, o); err != nil {
			t.Fatal(err)
		}
		assertTerminalSafe(t, "the logs", out.String())
		assertVisible(t, "the logs", out.String())
		// Lines stay lines, the one of a carriage return and a line feed too.
		if !strings.Contains(out.String(), "[faces-detect-a] "+Printable(hostile)+"\n") ||
			!strings.Contains(out.String(), "[faces-detect-a] windows line\n") || strings.Count(out.String(), "\n") != 4 {
			t.Errorf("logs (follow %v):\n%s", o.Follow, out.String())
		}
	}
}

func TestTraceEscapes(t *testing.T) {
	ls, s := newLogServer(t)
	ls.logs["faces-router-a"] = append(ls.logs["faces-router-a"],
		`2026-11-20T10:00:05Z time=2026-11-20T10:00:05Z level=WARN msg="pipeline request failed" requestID=req-42 error="`+hostile+`"`)
	ctx := context.Background()
	lines, err := s.Trace(ctx, &bytes.Buffer{}, ls.pods[3:], "req-42")
	if err != nil || len(lines) != 3 {
		t.Fatalf("trace: %d lines, %v", len(lines), err)
	}
	var out bytes.Buffer
	if err := WriteTrace(&out, lines); err != nil {
		t.Fatal(err)
	}
	assertTerminalSafe(t, "the trace", out.String())
	assertVisible(t, "the trace", out.String())
	if strings.Count(out.String(), "\n") != 3 {
		t.Errorf("trace of 3 lines:\n%s", out.String())
	}
	out.Reset()
	if err := WriteNothingFound(&out, ls.pods[3:], "req\x1b]0;x\a"); err != nil {
		t.Fatal(err)
	}
	assertTerminalSafe(t, "nothing found", out.String())
}

// An error, which may quote the apiserver or a pod, keeps its lines and nothing else.
func TestWriteError(t *testing.T) {
	var b bytes.Buffer
	WriteError(&b, errors.Join(errors.New("no pod's logs could be read"), errors.New("pod a: "+hostile)))
	assertTerminalSafe(t, "the error", b.String())
	assertVisible(t, "the error", b.String())
	if !strings.HasPrefix(b.String(), "error: no pod's logs could be read\npod a: crashed ") || strings.Count(b.String(), "\n") != 2 {
		t.Errorf("error:\n%s", b.String())
	}
}
