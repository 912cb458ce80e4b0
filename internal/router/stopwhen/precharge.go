package stopwhen

import (
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/decls"
	"cel.dev/cel-go/common/functions"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
)

// Calls charged before they run.
//
// CEL's cost tracker charges a call once the call has returned, and an evaluation watches its
// context only between the steps of a comprehension: a single call runs to its end, whatever
// the cost limit or the request's deadline. Most calls of the environment do work in
// proportion to their arguments, which the budget already holds. Those below do more: they
// compare a list with itself or with another (distinct, sort, sortBy, the sets and has*
// functions), search a string for a pattern (matches, indexOf, lastIndexOf), or make a result
// far larger than their arguments (replace, split, join). Each is charged before it runs, by
// the tracker that charges it after, from its arguments and, where it matters, from the size of
// its result counted first: a call that would pass the cost limit is not made, and the
// evaluation fails as it would have once the call returned.
//
// prechargedFunctions maps each such function to the size of its result, known before the call
// (nil when its cost does not depend on its result).
var prechargedFunctions = map[string]func(args []ref.Val) ref.Val{
	"distinct":              nil,
	"sort":                  nil,
	"@sortByAssociatedKeys": nil,
	"sets.contains":         nil,
	"sets.equivalent":       nil,
	"sets.intersects":       nil,
	"hasOnly":               nil,
	"hasAny":                nil,
	"hasAll":                nil,
	"hasExactly":            nil,
	"matches":               nil,
	"indexOf":               nil,
	"lastIndexOf":           nil,
	"replace":               replacedSize,
	"split":                 splitSize,
	"join":                  joinedSize,
}

// precharge is the program option that charges the calls of prechargedFunctions before they
// run, with their implementations in env.
func precharge(env *cel.Env) cel.ProgramOption {
	fns := env.Functions()
	return cel.CustomDecoratorV2(func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		call, ok := i.(interpreter.InterpretableCall)
		if !ok {
			return i, nil
		}
		size, ok := prechargedFunctions[call.Function()]
		if !ok {
			return i, nil
		}
		impl, err := binding(fns[call.Function()], call.OverloadID())
		if err != nil {
			return nil, fmt.Errorf("stopWhen function %s: %w", call.Function(), err)
		}
		return &prechargedCall{InterpretableCall: call, impl: impl, resultSize: size}, nil
	})
}

// binding is the implementation of overload of fn: that overload's when the checker chose it,
// else the function's, which dispatches on its arguments.
func binding(fn *decls.FunctionDecl, overload string) (*functions.Overload, error) {
	if fn == nil {
		return nil, errors.New("not declared")
	}
	bindings, err := fn.Bindings()
	if err != nil {
		return nil, err
	}
	var named *functions.Overload
	for _, b := range bindings {
		switch b.Operator {
		case overload:
			return b, nil
		case fn.Name():
			named = b
		}
	}
	if named == nil {
		return nil, fmt.Errorf("no implementation of overload %q", overload)
	}
	return named, nil
}

// prechargedCall is a call charged before it runs; it is the call it replaces in every other
// way (its arguments evaluated first, strictly, its implementation, its charge after).
type prechargedCall struct {
	interpreter.InterpretableCall
	impl       *functions.Overload
	resultSize func(args []ref.Val) ref.Val
}

// Exec evaluates the arguments, then makes the call unless its cost is more than the cost
// limit leaves: then the evaluation ends.
func (c *prechargedCall) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	argExprs := c.Args()
	args := make([]ref.Val, len(argExprs))
	for i, a := range argExprs {
		v := a.Exec(frame)
		if types.IsUnknownOrError(v) {
			return v
		}
		args[i] = v
	}
	tracker := frame.CostTracker()
	if tracker != nil && tracker.Limit != nil {
		var result ref.Val
		if c.resultSize != nil {
			result = c.resultSize(args)
		}
		cost := tracker.CostCall(c, args, result)
		if left := *tracker.Limit - min(tracker.ActualCost(), *tracker.Limit); cost > left {
			// The evaluation ends, as the tracker ends it once a call passes the limit.
			panic(interpreter.EvalCancelledError{Cause: interpreter.CostLimitExceeded, Message: fmt.Sprintf(
				"operation cancelled: actual cost limit exceeded: %s() of these arguments costs %d, %d of the limit %d are left",
				strings.TrimPrefix(c.Function(), "@"), cost, left, *tracker.Limit)})
		}
	}
	res := types.LabelErrNode(c.ID(), c.call(args))
	if tracker != nil {
		tracker.EvalVarArgs(frame, c.ID(), c, args, res)
	}
	return res
}

// call runs the implementation, as CEL's own call does: on a receiver without the trait the
// implementation needs, the receiver's method of that name.
func (c *prechargedCall) call(args []ref.Val) ref.Val {
	o := c.impl
	if o.OperandTrait != 0 && !args[0].Type().HasTrait(o.OperandTrait) {
		if r, ok := args[0].(traits.Receiver); ok {
			return r.Receive(c.Function(), c.OverloadID(), args[1:])
		}
		return types.NewErr("no such overload: %s", c.Function())
	}
	switch {
	case len(args) == 1 && o.Unary != nil:
		return o.Unary(args[0])
	case len(args) == 2 && o.Binary != nil:
		return o.Binary(args[0], args[1])
	case o.Function != nil:
		return o.Function(args...)
	}
	return types.NewErr("no such overload: %s", c.Function())
}

// Eval implements interpreter.Interpretable.
func (c *prechargedCall) Eval(a interpreter.Activation) ref.Val {
	return interpreter.EvalActivation(a, c.Exec)
}

// sortCost charges a sort whose overload the checker could not choose (the list's elements are
// dyn, as a response's and the tensors' are): CEL knows no cost for it, and charges it 1. A
// sort compares its n elements n·log₂n times, and reads each key twice per comparison.
type sortCost struct{}

// CallCost implements cost.ActualCostEstimator.
func (sortCost) CallCost(function, overloadID string, args []ref.Val, _ ref.Val) *uint64 {
	var list ref.Val
	switch {
	case overloadID != "":
		return nil
	case function == "sort" && len(args) == 1:
		list = args[0]
	case function == "@sortByAssociatedKeys" && len(args) == 2:
		list = args[1]
	default:
		return nil
	}
	sz, ok := list.(traits.Sizer)
	if !ok {
		return nil
	}
	n, _ := sz.Size().(types.Int)
	if n <= 0 {
		return nil
	}
	c := uint64(n)
	hi, lo := bits.Mul64(2*c, uint64(bits.Len64(c)))
	if hi != 0 {
		lo = ^uint64(0)
	}
	return &lo
}

// sized is the result of a call whose size is counted before the call: what the tracker needs
// of it (its size and type) and nothing else.
type sized struct {
	size types.Int
	t    ref.Type
}

var errSized = errors.New("the size of a result, not a value")

func (s sized) ConvertToNative(reflect.Type) (any, error) { return nil, errSized }
func (s sized) ConvertToType(ref.Type) ref.Val            { return types.WrapErr(errSized) }
func (s sized) Equal(ref.Val) ref.Val                     { return types.WrapErr(errSized) }
func (s sized) Type() ref.Type                            { return s.t }
func (s sized) Value() any                                { return int64(s.size) }

// Size implements traits.Sizer.
func (s sized) Size() ref.Val { return s.size }

// stringArgs are args as strings, and an optional count after them; false when they are not.
func stringArgs(args []ref.Val, n int) ([]string, int64, bool) {
	if len(args) < n {
		return nil, 0, false
	}
	s := make([]string, n)
	for i := range n {
		v, ok := args[i].(types.String)
		if !ok {
			return nil, 0, false
		}
		s[i] = string(v)
	}
	count := int64(-1)
	if len(args) > n {
		c, ok := args[n].(types.Int)
		if !ok {
			return nil, 0, false
		}
		count = int64(c)
	}
	return s, count, true
}

// replacedSize is the length of s.replace(old, new[, n]), in code points.
func replacedSize(args []ref.Val) ref.Val {
	s, n, ok := stringArgs(args, 3)
	if !ok {
		return nil
	}
	str, old, repl := s[0], s[1], s[2]
	matches := int64(strings.Count(str, old)) // for "" the code points and one
	if n >= 0 {
		matches = min(matches, n)
	}
	runes := int64(utf8.RuneCountInString(str)) + matches*(int64(utf8.RuneCountInString(repl))-int64(utf8.RuneCountInString(old)))
	return sized{size: types.Int(runes), t: types.StringType}
}

// splitSize is the number of parts of s.split(sep[, n]).
func splitSize(args []ref.Val) ref.Val {
	s, n, ok := stringArgs(args, 2)
	if !ok {
		return nil
	}
	str, sep := s[0], s[1]
	parts := int64(strings.Count(str, sep)) + 1
	if sep == "" {
		parts = int64(utf8.RuneCountInString(str))
	}
	if n >= 0 {
		parts = min(parts, n)
	}
	return sized{size: types.Int(parts), t: types.ListType}
}

// joinedSize is the length of list.join([sep]), in code points.
func joinedSize(args []ref.Val) ref.Val {
	list, ok := args[0].(traits.Lister)
	if !ok {
		return nil
	}
	var sep int64
	if len(args) > 1 {
		s, ok := args[1].(types.String)
		if !ok {
			return nil
		}
		sep = int64(utf8.RuneCountInString(string(s)))
	}
	n, _ := list.Size().(types.Int)
	var runes int64
	for i := types.Int(0); i < n; i++ {
		s, ok := list.Get(i).(types.String)
		if !ok {
			return nil
		}
		runes += int64(utf8.RuneCountInString(string(s)))
	}
	if n > 0 {
		runes += (int64(n) - 1) * sep
	}
	return sized{size: types.Int(runes), t: types.StringType}
}
