package router

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
)

const (
	// MaxStopWhenLength is the longest stopWhen expression, in bytes.
	MaxStopWhenLength = 4096
	// stopWhenCostLimit bounds the work one evaluation may do (the per-expression limit
	// Kubernetes uses for CEL in CRD validation rules).
	stopWhenCostLimit = 1_000_000
)

// stopWhenEnv is the CEL environment every stopWhen expression is compiled in: the standard
// library, the string, list and set extensions, and three variables: response (the step's
// decoded JSON body, or null), status (the HTTP status, an int) and headers (the first value of
// every response header, by lower-case name).
var stopWhenEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("response", cel.DynType),
		cel.Variable("status", cel.IntType),
		cel.Variable("headers", cel.MapType(cel.StringType, cel.StringType)),
		ext.Strings(),
		ext.Lists(),
		ext.Sets(),
	)
})

// StopWhen is a compiled stopWhen expression; safe for concurrent use.
type StopWhen struct {
	expr    string
	program cel.Program
}

// StopWhenInput is what a stopWhen expression sees of a step's response.
type StopWhenInput struct {
	// Response is the decoded JSON body, nil when the body is not JSON.
	Response any
	// Status is the HTTP status code.
	Status int
	// Headers maps the lower-case header names to their first values.
	Headers map[string]string
}

// CompileStopWhen compiles expr with the router's CEL environment. The error carries the
// compiler's message; an expression that is not a bool is refused.
func CompileStopWhen(expr string) (*StopWhen, error) {
	if len(expr) > MaxStopWhenLength {
		return nil, fmt.Errorf("the expression is %d bytes, at most %d are allowed", len(expr), MaxStopWhenLength)
	}
	env, err := stopWhenEnv()
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
	prg, err := env.Program(ast,
		cel.CostLimit(stopWhenCostLimit),
		cel.InterruptCheckFrequency(100),
	)
	if err != nil {
		return nil, err
	}
	return &StopWhen{expr: expr, program: prg}, nil
}

// String is the expression's source.
func (s *StopWhen) String() string { return s.expr }

// Eval reports whether the pipeline stops at a step whose response is in.
func (s *StopWhen) Eval(ctx context.Context, in StopWhenInput) (bool, error) {
	headers := in.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	val, _, err := s.program.ContextEval(ctx, map[string]any{
		"response": in.Response,
		"status":   int64(in.Status),
		"headers":  headers,
	})
	if err != nil {
		return false, err
	}
	b, ok := val.Value().(bool)
	if !ok {
		return false, errors.New("the expression did not evaluate to a bool: " + val.Type().TypeName())
	}
	return b, nil
}
