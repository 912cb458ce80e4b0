// Package stopwhen compiles and evaluates a step's stopWhen expression (CEL): whether a
// pipeline ends at a step, given the step's answer. The operator compiles expressions to
// refuse bad ones at admission; the router evaluates them on every answer.
package stopwhen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

const (
	// MaxLength is the longest stopWhen expression, in bytes.
	MaxLength = 4096
	// costLimit bounds the work one evaluation may do (the per-expression limit
	// Kubernetes uses for CEL in CRD validation rules).
	costLimit = 1_000_000
)

// celEnv is the CEL environment every stopWhen expression is compiled in: the standard
// library, the string, list and set extensions, and four variables: response (the step's
// decoded JSON body, or null), status (the HTTP status, an int), headers (the first value of
// every response header, by lower-case name) and tensors (the output tensors of an Open
// Inference Protocol answer, by name, each a flat list of its decoded elements).
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("response", cel.DynType),
		cel.Variable("status", cel.IntType),
		cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("tensors", cel.MapType(cel.StringType, cel.ListType(cel.DynType))),
		ext.Strings(),
		ext.Lists(),
		ext.Sets(),
	)
})

// Expr is a compiled stopWhen expression; safe for concurrent use.
type Expr struct {
	expr    string
	program cel.Program
	// readsResponse is false when the expression cannot read the variable response: the
	// step's answer need not be decoded.
	readsResponse bool
	// readsTensors is true when the expression may read the variable tensors.
	readsTensors bool
	// costTracked is true when the expression's work grows with its input: it runs under
	// costLimit.
	costTracked bool
}

// Input is what a stopWhen expression sees of a step's response.
type Input struct {
	// Response is the JSON body, decoded into Go values or a CEL value read lazily (package celjson); nil
	// when the body is not JSON.
	Response any
	// Tensors are the output tensors of an Open Inference Protocol answer, by name, each a flat
	// list of its elements (oip.Decode); nil otherwise.
	Tensors map[string][]any
	// Status is the HTTP status code.
	Status int
	// Headers maps the lower-case header names to their first values.
	Headers map[string]string
	// Header is the response's header, used when Headers is nil: the expression sees the first
	// value of each, by lower-case name, built only when it reads them.
	Header http.Header
}

// Compile compiles expr with the router's CEL environment. The error carries the
// compiler's message; an expression that is not a bool is refused.
func Compile(expr string) (*Expr, error) {
	if len(expr) > MaxLength {
		return nil, fmt.Errorf("the expression is %d bytes, at most %d are allowed", len(expr), MaxLength)
	}
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("stopWhen environment: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("the expression must be a bool, it is %s", t)
	}
	sw := &Expr{expr: expr, readsResponse: readsVariable(ast.NativeRep(), "response"),
		readsTensors: readsVariable(ast.NativeRep(), "tensors"),
		costTracked:  !boundedBelow(env, ast, costLimit)}
	opts := []cel.ProgramOption{cel.InterruptCheckFrequency(100)}
	if sw.costTracked {
		opts = append(opts, cel.CostLimit(costLimit), cel.CostTracking(sortCost{}), precharge(env))
	}
	if sw.program, err = env.Program(ast, opts...); err != nil {
		return nil, err
	}
	return sw, nil
}

// boundedBelow reports whether the checked expression costs at most limit whatever its
// input: whether CEL's static estimate, with the size of every variable and of everything in
// it unknown (unbounded), stays within limit. Such an expression (a field compared with a
// number, size() of a list) needs no cost tracking as it runs, which costs more than
// evaluating it. Any expression whose work grows with its input (a comprehension, a string
// search) is estimated above any limit, and runs under it.
//
// The estimate can fall short of the tracked cost by one unit for each node of the
// expression (a select on a dyn value): those are added.
func boundedBelow(env *cel.Env, ast *cel.Ast, limit uint64) bool {
	est, err := env.EstimateCost(ast, unknownSizes{})
	if err != nil {
		return false
	}
	nodes := exprNodes(ast)
	return nodes <= limit && est.Max <= limit-nodes
}

// exprNodes counts the nodes of a checked expression.
func exprNodes(ast *cel.Ast) uint64 {
	all := func(celast.NavigableExpr) bool { return true }
	return uint64(len(celast.MatchDescendants(celast.NavigateAST(ast.NativeRep()), all)))
}

// unknownSizes is a cost estimator that knows no size and no call's cost: CEL's estimate then
// assumes the largest.
type unknownSizes struct{}

func (unknownSizes) EstimateSize(cost.AstNode) *cost.SizeEstimate { return nil }

func (unknownSizes) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// readsVariable reports whether the checked expression may read the variable name: whether
// any identifier, or any name the checker resolved, is name or starts with it (a qualified
// name, a leading dot). A comprehension's own variable of that name counts too, so that the
// answer errs on the side of reading.
func readsVariable(a *celast.AST, name string) bool {
	refers := func(n string) bool {
		n = strings.TrimPrefix(n, ".")
		return n == name || strings.HasPrefix(n, name+".")
	}
	for _, ref := range a.ReferenceMap() {
		if refers(ref.Name) {
			return true
		}
	}
	for _, e := range celast.MatchDescendants(celast.NavigateAST(a), celast.KindMatcher(celast.IdentKind)) {
		if refers(e.AsIdent()) {
			return true
		}
	}
	return false
}

// ReadsResponse reports whether the expression may read the variable response: when it
// cannot, the step's answer need not be decoded.
func (s *Expr) ReadsResponse() bool { return s.readsResponse }

// ReadsTensors reports whether the expression reads the variable tensors, which only an Open
// Inference Protocol step's answer has.
func (s *Expr) ReadsTensors() bool { return s.readsTensors }

// String is the expression's source.
func (s *Expr) String() string { return s.expr }

// Eval reports whether the pipeline stops at a step whose response is in.
func (s *Expr) Eval(ctx context.Context, in Input) (bool, error) {
	var (
		val ref.Val
		err error
	)
	if s.costTracked {
		// Work that grows with the answer also ends when ctx does (the caller went away).
		val, _, err = s.program.ContextEval(ctx, &activation{in: in})
	} else {
		// Bounded work: watching ctx would cost more than finishing.
		val, _, err = s.program.Eval(&activation{in: in})
	}
	if err != nil {
		return false, err
	}
	b, ok := val.Value().(bool)
	if !ok {
		return false, errors.New("the expression did not evaluate to a bool: " + val.Type().TypeName())
	}
	return b, nil
}

// stopWhenActivation gives an evaluation its three variables without a map of them, and
// makes headers only when the expression reads them.
type activation struct {
	in Input
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "response":
		return a.in.Response, true
	case "status":
		return int64(a.in.Status), true
	case "tensors":
		if a.in.Tensors == nil {
			return map[string][]any{}, true
		}
		return a.in.Tensors, true
	case "headers":
		if a.in.Headers == nil {
			a.in.Headers = firstValues(a.in.Header)
		}
		return a.in.Headers, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

// firstValues maps the lower-case name of every header to its first value, as stopWhen sees
// them.
func firstValues(h http.Header) map[string]string {
	m := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) > 0 {
			m[strings.ToLower(k)] = v[0]
		}
	}
	return m
}
