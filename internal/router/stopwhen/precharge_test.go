package stopwhen

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"cel.dev/cel-go/cel"
)

// TestPrechargedCallsAreRefusedBeforeTheyRun checks each function whose cost is charged before
// it runs: over arguments that cost more than the limit it is not made (the error names it, which
// the tracker's error after a call does not), over small ones it gives what CEL gives without
// the charge.
func TestPrechargedCallsAreRefusedBeforeTheyRun(t *testing.T) {
	ints := make([]any, 32768)
	for i := range ints {
		ints[i] = int64(i)
	}
	million := make([]any, 1<<20)
	for i := range million {
		million[i] = float64(i % 1000)
	}
	long := make([]any, 2000)
	for i := range long {
		long[i] = strings.Repeat("y", 1000)
	}
	large := Input{
		Tensors: map[string][]any{"x": ints, "big": million},
		Response: map[string]any{"s": strings.Repeat("a", 1<<20), "p": strings.Repeat("a", 1024) + "b", "strs": long,
			"small": []any{3.0, 1.0, 2.0, 1.0}},
	}
	small := Input{
		Tensors:  map[string][]any{"x": {int64(2), int64(1), int64(2)}, "big": {1.0, 3.0, 2.0}},
		Response: map[string]any{"s": "banana", "p": "an", "strs": []any{"a", "b"}, "small": []any{3.0, 1.0}},
	}
	for _, tc := range []struct{ expr, function string }{
		{"size(tensors.x.distinct()) > 1", "distinct"},
		{"tensors.big.sort()[0] < 5.0", "sort"},
		{"size(response.small.sort()) > 0 && tensors.big.sort()[0] < 5.0", "sort"},
		{"sets.contains(tensors.x, tensors.x)", "sets.contains"},
		{"sets.equivalent(tensors.x, tensors.x)", "sets.equivalent"},
		{"sets.intersects(tensors.x, [-1])", ""}, // one list of one element: linear, made
		{"sets.intersects(tensors.x, tensors.x)", "sets.intersects"},
		{"tensors.x.hasAll(tensors.x)", "hasAll"},
		{"tensors.x.hasOnly(tensors.x)", "hasOnly"},
		{"tensors.x.hasExactly(tensors.x)", "hasExactly"},
		{"tensors.x.hasAny(tensors.x.map(v, -1 - v))", "hasAny"},
		{"response.s.matches(response.p)", "matches"},
		{"response.s.indexOf(response.p) > 0", "indexOf"},
		{"response.s.lastIndexOf(response.p) > 0", "lastIndexOf"},
		{"size(response.s.replace('a', '" + strings.Repeat("b", 100) + "')) > 0", "replace"},
		{"size(response.p.replace('a', 'b')) > 0", ""}, // a short string: made
		{"size(response.s.split('')) > 0", "split"},
		{"size(response.strs.join('-')) > 0", "join"},
	} {
		sw, err := Compile(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = sw.Eval(context.Background(), large)
		switch {
		case tc.function == "" && err != nil:
			t.Errorf("%s: %v", tc.expr, err)
		case tc.function != "" && (err == nil || !strings.Contains(err.Error(), "cost limit exceeded: "+tc.function+"() of these arguments")):
			t.Errorf("%s: error %v, want %s() refused before it runs", tc.expr, err, tc.function)
		}
		got, err := sw.Eval(context.Background(), small)
		want, werr := evalWithoutPrecharge(t, tc.expr, small)
		if (err == nil) != (werr == nil) || got != want {
			t.Errorf("%s on small arguments: %v, %v; without the charge before %v, %v", tc.expr, got, err, want, werr)
		}
	}
}

// evalWithoutPrecharge evaluates expr as CEL does, under the cost limit but without charging
// calls before they run.
func evalWithoutPrecharge(t *testing.T, expr string, in Input) (bool, error) {
	t.Helper()
	env, err := celEnv()
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := env.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := prg.Eval(&activation{in: in})
	if err != nil {
		return false, err
	}
	b, _ := v.Value().(bool)
	return b, nil
}

// TestSortOfDynIsCharged checks that a sort whose overload the checker cannot choose (a list of
// dyn, as every tensor is) is charged for its comparisons: CEL charges it 1.
func TestSortOfDynIsCharged(t *testing.T) {
	sw, err := Compile("tensors.x.sort()[0] >= 0.0")
	if err != nil {
		t.Fatal(err)
	}
	fits := make([]any, 10_000) // 2 × 10,000 × 14 comparisons
	for i := range fits {
		fits[i] = float64(len(fits) - i)
	}
	if ok, err := sw.Eval(context.Background(), Input{Tensors: map[string][]any{"x": fits}}); err != nil || !ok {
		t.Fatalf("a sort of %d elements: %v, %v", len(fits), ok, err)
	}
	tooMany := make([]any, 100_000) // 2 × 100,000 × 17
	for i := range tooMany {
		tooMany[i] = float64(i)
	}
	if _, err := sw.Eval(context.Background(), Input{Tensors: map[string][]any{"x": tooMany}}); err == nil ||
		!strings.Contains(err.Error(), "sort() of these arguments costs 3400000") {
		t.Fatalf("a sort of %d elements: error %v, want it refused before it runs", len(tooMany), err)
	}
}

// TestADeadlineStopsAnEvaluation checks that an evaluation whose work grows with the answer
// stops at the context's deadline.
func TestADeadlineStopsAnEvaluation(t *testing.T) {
	sw, err := Compile("tensors.x.all(v, v >= 0)")
	if err != nil {
		t.Fatal(err)
	}
	x := make([]any, 100_000)
	for i := range x {
		x[i] = int64(i)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := sw.Eval(ctx, Input{Tensors: map[string][]any{"x": x}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after the deadline: error %v, want the deadline", err)
	}
}
