package celjson

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/ndsl-cn/pipeline-operator/internal/router/stopwhen"
)

// jsonValueExpressions read a document every way an expression can: members and elements,
// sizes, presence, membership, equality on either side, comprehensions, conversions and the
// list and set extensions, on objects, arrays and scalars alike (where they do not apply, the
// errors must match too).
var jsonValueExpressions = []string{
	"size(response.items) == 0",
	"size(response.items) == 2",
	"size(response) == 2",
	"response.items[0] == 1.0",
	`response.items[1] == "b"`,
	"response.items[-1] == 1.0",
	"response.items[7] == 1.0",
	"response.items[1.0] == 1.0",
	"response[0] == 1.0",
	"response[1] == 1.0",
	`response["a"] == 1.0`,
	`response["a\"b"] == 1.0`,
	`response["é"] == 1.0`,
	"response.a == 2.0",
	"response.a.b.c == null",
	`has(response.a) && response.a != "x"`,
	"has(response.items)",
	`"a" in response`,
	`1.0 in response.items`,
	`"b" in response.items`,
	`response == {"a": 2.0}`,
	`{"a": 2.0} == response`,
	`response.items == [1.0, "b"]`,
	`[1.0, "b"] == response.items`,
	"response == response",
	"response.items + [3] == [1.0, 3]",
	"response.items.exists(x, x == 1.0)",
	`response.items.all(x, type(x) == double)`,
	"response.items.map(x, type(x)).size() > 0",
	`response.exists(k, k == "a")`,
	`response.all(k, k != "" && response[k] != null)`,
	"type(response) == map",
	"type(response.items) == list",
	"type(response) == double",
	`string(response) == "1"`,
	"int(response.n) == 1",
	"response.ok",
	"response.items.distinct().size() == 2",
	"sets.contains(response.items, [1.0])",
	`response.s.startsWith("x")`,
	"response == null",
	"response.items.slice(0, 1) == [1.0]",
	"dyn(response).items[0] == 1.0",
}

// jsonValueDocuments are documents of every shape the expressions meet, and some they do not.
var jsonValueDocuments = []string{
	`{"items": [], "a": 2}`,
	`{"items": [1, "b"], "a": 2}`,
	`{"items": [1, "b"], "a": 2, "items": [1]}`,
	`{"a": {"b": {"c": null}}, "n": 1, "ok": true, "s": "xyz"}`,
	`{"a\"b": 1, "\u00e9": 1, "a": 1}`,
	"{\"caf\xff\": 1, \"\\u0061\": 2}",
	`[1, 2, 3]`,
	`[]`,
	`[[]]`,
	`{}`,
	`1`,
	`"x"`,
	`null`,
	`true`,
	` { "items" : [ 1 , "b" , { "c" : [ ] } ] } `,
	`{"items": [1, "b"]`,
	`not json`,
}

func TestJSONValueEvaluatesAsTheDecodedDocument(t *testing.T) {
	for _, doc := range jsonValueDocuments {
		checkJSONValueAsDecoded(t, []byte(doc))
	}
	checkJSONValueAsDecoded(t, itemsDocument(t))
}

// FuzzJSONValue checks every expression on the document read as it is read and decoded whole.
func FuzzJSONValue(f *testing.F) {
	for _, doc := range jsonValueDocuments {
		f.Add([]byte(doc))
	}
	for _, doc := range jsonDecodeCases {
		f.Add([]byte(doc))
	}
	f.Fuzz(checkJSONValueAsDecoded)
}

// jsonValueStopWhens are jsonValueExpressions compiled, once.
var jsonValueStopWhens = sync.OnceValues(func() ([]*stopwhen.Expr, error) {
	var all []*stopwhen.Expr
	for _, expr := range jsonValueExpressions {
		sw, err := stopwhen.Compile(expr)
		if err != nil {
			return nil, err
		}
		all = append(all, sw)
	}
	return all, nil
})

// checkJSONValueAsDecoded evaluates every expression on doc read by Value and decoded by
// decodeJSON: the same answer, or an error for both.
func checkJSONValueAsDecoded(t *testing.T, doc []byte) {
	t.Helper()
	ctx := context.Background()
	read := Value(doc)
	decoded := decodeJSON(doc)
	var v any
	if wantErr := json.Unmarshal(doc, &v); (read == nil) != (wantErr != nil) {
		t.Fatalf("%q: read as %v, encoding/json's error %v", doc, read, wantErr)
	}
	var in stopwhen.Input
	if read != nil {
		in.Response = read
	}
	compiled, err := jsonValueStopWhens()
	if err != nil {
		t.Fatal(err)
	}
	for _, sw := range compiled {
		expr := sw.String()
		got, gotErr := sw.Eval(ctx, in)
		want, wantErr := sw.Eval(ctx, stopwhen.Input{Response: decoded})
		// Errors may name the Go type of a value: only whether there is one must match.
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%s on %q: %v, %v; decoded: %v, %v", expr, doc, got, gotErr, want, wantErr)
		}
	}
}

// TestJSONValueReadsWithoutDecoding checks the point of reading: an expression that reads a
// member, or counts an array, gets its answer without the document being decoded.
func TestJSONValueReadsWithoutDecoding(t *testing.T) {
	for expr, want := range map[string]bool{
		"size(response.items) == 2":   true,
		"response.items[1] == 'b'":    true,
		"response.a == 2.0":           true,
		"has(response.z)":             false,
		`response["items"][0] == 3.0`: false,
	} {
		doc := Value([]byte(`{"items": [1, "b"], "a": 2, "s": "` + strings.Repeat("x", 1000) + `"}`))
		sw, err := stopwhen.Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sw.Eval(context.Background(), stopwhen.Input{Response: doc})
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", expr, got, err, want)
		}
		if o := doc.(*jsonObject); o.decoded != nil {
			t.Errorf("%s: the document was decoded", expr)
		}
	}
}

// TestJSONValueReadsAnAnswerAFewTimesAtMost evaluates expressions that would read a large
// answer over and over in place (a member selected again and again, an array counted in a
// loop, a deep chain of members, each level going over the text below it): the answer is gone
// over in place at most jsonReadAllowance times, then decoded once, and the answers are those
// of the decoded document.
func TestJSONValueReadsAnAnswerAFewTimesAtMost(t *testing.T) {
	const depth = 100
	pad := `"` + strings.Repeat("p", 10<<10) + `"`
	items := "[" + strings.Repeat(pad+",", 100) + "1]"
	deep := `{"v": 1}`
	for range depth {
		deep = `{"a": ` + deep + `, "p": ` + pad + `}`
	}
	doc := []byte(`{"items": ` + items + `, "deep": ` + deep + `}`)
	chain := "response.deep" + strings.Repeat(".a", depth) + ".v"
	for _, expr := range []string{
		strings.Repeat("size(response.items) < 0 || ", 100) + "false",
		"lists.range(300).all(i, size(response.items) == 101)",
		chain + " == 1.0",
		chain + " == 1.0 && " + chain + " == 1.0 && response.items[100] == 1.0",
		strings.Repeat(`response.items[7] == "x" || `, 50) + "false",
		"[response.deep, response.deep, response.deep] == [response.deep, response.deep, response.deep]",
	} {
		sw, err := stopwhen.Compile(expr)
		if err != nil {
			t.Fatalf("%.80s: %v", expr, err)
		}
		v := Value(doc)
		got, err := sw.Eval(context.Background(), stopwhen.Input{Response: v})
		want, wantErr := sw.Eval(context.Background(), stopwhen.Input{Response: decodeJSON(doc)})
		if got != want || err != nil || wantErr != nil {
			t.Errorf("%.80s: %v, %v; decoded: %v, %v", expr, got, err, want, wantErr)
		}
		d := v.(*jsonObject).doc
		if d.scanned > jsonReadAllowance*len(doc) || d.decodes > 1 {
			t.Errorf("%.80s: went over %d bytes of a %d-byte answer in place, and decoded it %d times",
				expr, d.scanned, len(doc), d.decodes)
		}
	}
}
