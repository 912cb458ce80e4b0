package celjson

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/ndsl-cn/pipeline-operator/internal/router/stopwhen"
)

// jsonValueExpressions read a document every way an expression can, on objects, arrays and
// scalars alike: where an expression does not apply to a document, the errors must match too.
var jsonValueExpressions = []string{
	// Members: selected, indexed by key, nested, present or not.
	"response.a == 2.0",
	"response.a == 2",
	"response.a.b.c == null",
	"response.a.b == {'c': null}",
	`response["a"] == 1.0`,
	`response["a\"b"] == 1.0`,
	`response["é"] == 1.0`,
	`response["caf\ufffd"] == 1.0`,
	`response[""] == 1.0`,
	"response[1] == 2.0",
	"response.k16 == 16.0 && response.k0 == 'dup'",
	"response.ok",
	"response.ok == true",
	"response.items[2].c == []",
	"has(response.items)",
	"has(response.a.b)",
	"has(response.a.b.c)",
	`has(response.a) && response.a != "x"`,
	"has(response.k9) && !has(response.k99)",

	// Elements: indexed by int, uint, double, out of range; sizes of arrays, objects, strings.
	"response.items[0] == 1.0",
	`response.items[1] == "b"`,
	"response.items[1u] == 'b'",
	"response.items[1.0] == 'b'",
	"response.items[0.5] == 1.0",
	"response.items[-1] == 1.0",
	"response.items[7] == 1.0",
	"response.items[4294967296] == 1.0",
	"response.items[-4294967296] == 1.0",
	"response[4294967297] == 2.0",
	"response.items[4294967296u] == 1.0",
	"response.items[4294967296.0] == 1.0",
	"response[0] == 1.0",
	"response[2] == 3.0 && response[0] < response[1]",
	"response[0][0] == null",
	"size(response.items) == 0",
	"size(response.items) == 2",
	"response.items.size() == 3",
	"size(response) == 2",
	"size(response) > 16",
	"size(response.s) == 3",
	"response.s.size() == 3",

	// Membership, on lists and on maps' keys.
	`"a" in response`,
	`"items" in response && !("zz" in response)`,
	"1.0 in response.items",
	"1 in response.items",
	`"b" in response.items`,
	`{"c": []} in response.items`,
	"[] in response",
	"null in response",

	// Equality of whole values, on either side, and ordering.
	`response == {"a": 2.0}`,
	`{"a": 2.0} == response`,
	`response == {"items": [1.0, "b"], "a": 2.0}`,
	`response.items == [1.0, "b"]`,
	`[1.0, "b"] == response.items`,
	"response.items == []",
	"response == []",
	"response == [1, 2, 3]",
	"response == response",
	"response.items == response.items",
	"response.a == response.a",
	"response != null && response.items != response.a",
	"[response] == [response]",
	`{"r": response} == {"r": response}`,
	"response == null",
	"response == 1",
	`response == "x"`,
	"response == true",
	"response.a > 1.5",
	"response.a < 3",
	`response.s < "y"`,

	// Comprehensions over arrays and over objects' keys (only what does not depend on the
	// order of an object's keys).
	"response.items.exists(x, x == 1.0)",
	"response.items.exists_one(x, x == 'b')",
	`response.items.all(x, type(x) == double)`,
	"response.items.all(x, x in response.items)",
	"response.items.map(x, type(x)).size() > 0",
	"response.items.map(x, x == 1.0) == [true, false]",
	"response.items.map(x, type(x) == double, x + 1.0) == [2.0]",
	"response.items.filter(x, type(x) == string) == ['b']",
	"response.items.exists(x, type(x) == map && x.exists(k, k == 'c'))",
	`response.exists(k, k == "a")`,
	`response.exists(k, response[k] == 2.0)`,
	`response.all(k, k != "" && response[k] != null)`,
	"response.filter(k, k.startsWith('k')).size() == 17",
	"sets.equivalent(response.map(k, k), ['items', 'a'])",
	"response.exists(k, type(response[k]) == list && response[k].exists(x, x == 1.0))",

	// Members found by whatever keys the document has, and elements by whatever indexes.
	"response.all(k, type(response[k]) != list || size(response[k]) < 3)",
	"response.all(k, type(response[k]) != map || response[k].all(j, response[k][j] != 0.0))",
	"response.exists(k, response[k] == null || response[k] == '' || response[k] == [])",
	"lists.range(size(response)).exists(i, response[i] == 1.0 || response[i] == {})",

	// Types and conversions.
	"type(response) == map",
	"type(response.items) == list",
	"type(response) == double",
	"type(response.a) == map",
	`string(response) == "1"`,
	"int(response.n) == 1",
	"uint(response.n) == 1u",
	"double(response.s) == 1.0",
	"string(response.items[1]) == 'b'",
	"bool(response.ok)",
	"dyn(response).items[0] == 1.0",
	"response.n == 1e300 || response.n == -0.0",

	// String functions.
	`response.s.startsWith("x")`,
	`response.s.endsWith("z")`,
	`response.s.contains("y")`,
	`response.s.matches("^x.z$")`,
	`response.s + "!" == "xyz!"`,
	`response.s.lowerAscii() == "xyz"`,
	`response.s.split("y").size() == 2`,
	`response.s.indexOf("z") == 2`,
	`response.s.charAt(0) == "x"`,
	`response.s.substring(1) == "yz"`,
	`response.items.filter(x, type(x) == string).join(",") == "b"`,

	// The list and set extensions.
	"response.items + [3] == [1.0, 3]",
	"response.items.distinct().size() == 2",
	"response.items.flatten().size() > 0",
	"response.items.slice(0, 1) == [1.0]",
	"sets.contains(response.items, [1.0])",
	"sets.intersects(response.items, ['b'])",
}

// jsonValueDocuments are documents of every shape the expressions meet, and some they do not.
var jsonValueDocuments = []string{
	`{"items": [], "a": 2}`,
	`{"items": [1, "b"], "a": 2}`,
	`{"items": [1, "b", {"c": []}], "a": 2}`,
	`{"items": [1, "b"], "a": 2, "items": [1]}`,
	`{"a": {"b": {"c": null}}, "n": 1, "ok": true, "s": "xyz"}`,
	`{"a": {"b": {"c": 1}, "b": {"c": null}}, "s": "1.0", "n": 1e300}`,
	`{"a\"b": 1, "\u00e9": 1, "a": 1, "": 1}`,
	"{\"caf\xff\": 1, \"\\u0061\": 2}",
	`{"s": "x\u0000z", "n": -0, "ok": "true", "items": [[1], [[]], "b"]}`,
	`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,` +
		`"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k0":"dup","items":[1,"b"]}`,
	`{"a": 2}`,
	`[1, 2, 3]`,
	`[null, {"a": 2}, [], 1e-400]`,
	`[[null], 2, 3]`,
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

func TestJSONValueEvaluatesAsEncodingJSON(t *testing.T) {
	for _, doc := range jsonValueDocuments {
		checkJSONValueAsEncodingJSON(t, []byte(doc))
	}
	checkJSONValueAsEncodingJSON(t, itemsDocument(t))
}

// FuzzJSONValue checks every expression on the document read by Value against the document
// decoded by encoding/json.
func FuzzJSONValue(f *testing.F) {
	addSeeds(f)
	f.Fuzz(checkJSONValueAsEncodingJSON)
}

// jsonValueStopWhens are jsonValueExpressions compiled, once.
var jsonValueStopWhens = sync.OnceValues(func() ([]*stopwhen.Expr, error) {
	var all []*stopwhen.Expr
	for _, expr := range jsonValueExpressions {
		sw, err := stopwhen.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", expr, err)
		}
		all = append(all, sw)
	}
	return all, nil
})

// checkJSONValueAsEncodingJSON evaluates every expression on doc read by Value and on doc
// decoded by encoding/json.Unmarshal into an `any` (null when it does not parse): the same
// answer, or an error for both. Each expression reads a Value of its own, so that it finds
// the document unread, and then all of them read one Value in turn, so that they find what
// the ones before left: members read, the allowance spent, the document decoded. Then the
// whole document is read member by member (checkReadAs), within the allowance and without.
func checkJSONValueAsEncodingJSON(t *testing.T, doc []byte) {
	t.Helper()
	var want any
	if err := json.Unmarshal(doc, &want); err != nil {
		want = nil
		if Value(doc) != nil {
			t.Fatalf("%q: read, though encoding/json refuses it: %v", doc, err)
		}
	} else if Value(doc) == nil {
		t.Fatalf("%q: not read, though encoding/json decodes it", doc)
	} else {
		checkReadAs(t, doc, "response", Value(doc), want)
		unbounded := Value(doc)
		switch c := unbounded.(type) {
		case *jsonObject:
			c.doc.allowance = math.MaxInt
		case *jsonArray:
			c.doc.allowance = math.MaxInt
		}
		checkReadAs(t, doc, "response", unbounded, want)
	}
	compiled, err := jsonValueStopWhens()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	shared := Value(doc)
	for _, sw := range compiled {
		wantOK, wantErr := sw.Eval(ctx, stopwhen.Input{Response: want})
		for _, read := range []ref.Val{Value(doc), shared} {
			var in stopwhen.Input
			if read != nil {
				in.Response = read
			}
			// Errors may name the Go type of a value: only whether there is one must match.
			if got, err := sw.Eval(ctx, in); got != wantOK || (err == nil) != (wantErr == nil) {
				t.Errorf("%s on %q: %v, %v; encoding/json's: %v, %v", sw, doc, got, err, wantOK, wantErr)
			}
		}
	}
}

// checkReadAs reads got, a value of doc read by Value, as CEL reads it, and compares it with
// want, what encoding/json decodes there: an object's size and each of its keys found (in
// order, so that a run reads the same way every time), an array's size and each of its
// elements, a scalar's value (the sign of a zero too).
func checkReadAs(t *testing.T, doc []byte, path string, got ref.Val, want any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		m, ok := got.(traits.Mapper)
		if !ok || got.Type() != types.MapType || m.Size() != types.Int(len(w)) {
			t.Errorf("%q: %s is %v (%v), encoding/json's a map of %d", doc, path, got, got.Type(), len(w))
			return
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			v, found := m.Find(types.String(k))
			if !found {
				t.Errorf("%q: %s[%q] not found", doc, path, k)
				continue
			}
			checkReadAs(t, doc, fmt.Sprintf("%s[%q]", path, k), v, w[k])
		}
	case []any:
		l, ok := got.(traits.Lister)
		if !ok || got.Type() != types.ListType || l.Size() != types.Int(len(w)) {
			t.Errorf("%q: %s is %v (%v), encoding/json's a list of %d", doc, path, got, got.Type(), len(w))
			return
		}
		for i := range w {
			checkReadAs(t, doc, fmt.Sprintf("%s[%d]", path, i), l.Get(types.Int(i)), w[i])
		}
	case float64:
		if d, ok := got.(types.Double); !ok || float64(d) != w || math.Signbit(float64(d)) != math.Signbit(w) {
			t.Errorf("%q: %s is %v (%v), encoding/json's %v", doc, path, got, got.Type(), w)
		}
	case nil:
		if got != types.NullValue {
			t.Errorf("%q: %s is %v (%v), encoding/json's null", doc, path, got, got.Type())
		}
	default: // a string or a bool
		if got.Value() != want {
			t.Errorf("%q: %s is %v (%v), encoding/json's %q", doc, path, got, got.Type(), want)
		}
	}
}

// TestJSONValueIndexBeyondInt checks indexes beyond an int on a 32-bit platform, read in
// place and decoded: an int selects no element, as in the decoded document; a uint or a double
// selects what it selects there (cel-go's lists wrap it, 1<<32 to element 0).
func TestJSONValueIndexBeyondInt(t *testing.T) {
	doc := []byte(`{"items": [1, "b"]}`)
	var decoded any
	if err := json.Unmarshal(doc, &decoded); err != nil {
		t.Fatal(err)
	}
	for expr, isInt := range map[string]bool{
		"response.items[4294967296] == 1.0":          true,
		"response.items[-4294967296] == 1.0":         true,
		"response.items[9223372036854775807] == 1.0": true,
		"response.items[4294967296u] == 1.0":         false,
		"response.items[4294967296.0] == 1.0":        false,
		"response.items[-4294967296.0] == 1.0":       false,
		"response.items[1e300] == 1.0":               false,
	} {
		sw, err := stopwhen.Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		want, wantErr := sw.Eval(context.Background(), stopwhen.Input{Response: decoded})
		if isInt && wantErr == nil {
			t.Errorf("%s on the decoded document: %v, no error", expr, want)
		}
		for _, spent := range []bool{false, true} {
			v := Value(doc)
			if spent {
				v.(*jsonObject).doc.allowance = 0
			}
			got, err := sw.Eval(context.Background(), stopwhen.Input{Response: v})
			if got != want || (err == nil) != (wantErr == nil) {
				t.Errorf("%s (allowance spent: %v): %v, %v; decoded: %v, %v", expr, spent, got, err, want, wantErr)
			}
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
// of the document encoding/json decodes.
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
	var decoded any
	if err := json.Unmarshal(doc, &decoded); err != nil {
		t.Fatal(err)
	}
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
		want, wantErr := sw.Eval(context.Background(), stopwhen.Input{Response: decoded})
		if got != want || err != nil || wantErr != nil {
			t.Errorf("%.80s: %v, %v; encoding/json's: %v, %v", expr, got, err, want, wantErr)
		}
		d := v.(*jsonObject).doc
		if d.scanned > jsonReadAllowance*len(doc) || d.decodes > 1 {
			t.Errorf("%.80s: went over %d bytes of a %d-byte answer in place, and decoded it %d times",
				expr, d.scanned, len(doc), d.decodes)
		}
	}
}
