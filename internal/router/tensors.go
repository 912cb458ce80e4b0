package router

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ndsl-cn/pipeline-operator/internal/router/bodies"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
)

// ReasonTensorMapping is the reason of a request that failed because a step's answer did not
// have, or did not fit, a tensor a later step's inputs map: 502.
const ReasonTensorMapping = "tensor_mapping"

// ReasonBadRequest is the reason of a request that lacks, or has a wrong, tensor a step's
// inputs map: 400.
const ReasonBadRequest = "bad_request"

// input is one mapped input of a step's request.
type input struct {
	// name is the input of the step's model.
	name string
	// source is where the tensor is: 0 for the pipeline's request, k for step k's answer.
	source int
	// tensor is its name there.
	tensor string
}

// mapping is what the router keeps of each request's tensors for the steps whose inputs are
// mapped: which bodies to hold, and until which step.
type mapping struct {
	// lastUse[k] is the index of the last step reading the tensors of source k (0 the request,
	// k step k's answer), -1 when none does.
	lastUse []int
}

// newMapping is the mapping of steps, nil when no step has mapped inputs.
func newMapping(steps []*step) *mapping {
	m := &mapping{lastUse: make([]int, len(steps)+1)}
	for k := range m.lastUse {
		m.lastUse[k] = -1
	}
	mapped := false
	for i, s := range steps {
		for _, in := range s.inputs {
			m.lastUse[in.source] = i
			mapped = true
		}
	}
	if !mapped {
		return nil
	}
	return m
}

// flow is the tensors of one request: the bodies later steps map inputs from, held until the
// last of them is called, and their tensors once read.
type flow struct {
	m       *mapping
	bodies  []payload
	tensors [][]oip.Tensor
	parsed  []bool
	// docLength[k] is the length of the JSON document of source k, read: where the bytes of
	// its binary tensors start.
	docLength []int64
	// held[k] is what reading source k holds besides its body (the tensors, and a copy of its
	// JSON document when that spans several blocks), counted against the budget until the body
	// is released.
	held   []int64
	reader oip.Reader
}

// newFlow is the flow of one request, reading tensors with rd (which charges its budget).
func (m *mapping) newFlow(rd oip.Reader) *flow {
	n := len(m.lastUse)
	return &flow{m: m, bodies: make([]payload, n), tensors: make([][]oip.Tensor, n), parsed: make([]bool, n),
		docLength: make([]int64, n), held: make([]int64, n), reader: rd}
}

// keep holds p, the body of source k (0 the request, k step k's answer), when a step after i
// maps its tensors: the flow then releases it (holds).
func (fl *flow) keep(k, i int, p payload) {
	if fl != nil && fl.m.lastUse[k] > i {
		fl.bodies[k] = p
	}
}

// holds reports whether the flow releases p.
func (fl *flow) holds(p payload) bool {
	if fl == nil || p.body == nil {
		return false
	}
	for _, b := range fl.bodies {
		if b.body == p.body {
			return true
		}
	}
	return false
}

// done releases the bodies no step after i maps tensors from.
func (fl *flow) done(i int) {
	if fl == nil {
		return
	}
	for k, b := range fl.bodies {
		if b.body != nil && fl.m.lastUse[k] <= i {
			b.body.Release()
			fl.reader.Budget.Release(fl.held[k])
			fl.bodies[k], fl.tensors[k], fl.parsed[k], fl.held[k] = payload{}, nil, false, 0
		}
	}
}

// release releases every body the flow holds.
func (fl *flow) release() { fl.done(len(fl.m.lastUse)) }

// read is the tensors of source k: the request's inputs or a step's outputs. A body all JSON
// is joined into one slice and read whole; under the binary data extension only its JSON
// header is read, and the tensors' bytes stay where they are until copied into a request.
// What reading holds is charged as it reads: the tensors, within the reader's bounds, refer
// to the body's bytes.
func (fl *flow) read(k int) ([]oip.Tensor, error) {
	if fl.parsed[k] {
		return fl.tensors[k], nil
	}
	p := fl.bodies[k]
	length, err := oip.ParseHeaderLength(p.inferenceHeader)
	if err != nil {
		return nil, err
	}
	if length > p.body.Len() {
		return nil, fmt.Errorf("%s is %d, the body has %d bytes", oip.HeaderInferenceHeaderLength, length, p.body.Len())
	}
	var (
		doc    []byte
		copied int64
	)
	if length < 0 {
		if err := p.body.Join(); err != nil {
			return nil, err
		}
		doc, length = p.body.Bytes(), p.body.Len()
	} else {
		if p.body.PrefixCopies(length) {
			// A header that spans several blocks is read from a copy.
			if !fl.reader.Budget.TryAcquire(length) {
				return nil, bodies.ErrBudgetExceeded
			}
			copied = length
		}
		doc = p.body.Prefix(length)
	}
	read := fl.reader.Response
	if k == 0 {
		read = fl.reader.Request
	}
	tensors, held, err := read(doc, p.body.Len()-length)
	if err != nil {
		fl.reader.Budget.Release(copied)
		return nil, err
	}
	fl.tensors[k], fl.docLength[k], fl.held[k], fl.parsed[k] = tensors, length, copied+held, true
	return tensors, nil
}

// request builds the request of step s from the tensors its inputs map, each checked against
// the input the step's model declares. A request that lacks a tensor, or whose tensor does not
// fit, is the caller's error (400); a step answer that does is a failure of the pipeline (502).
// The bytes of binary tensors are copied from the bodies they are in to the request's.
func (r *Router) request(fl *flow, s *step) (payload, *failure) {
	inputs := make([]oip.Tensor, 0, len(s.inputs))
	binary := false
	for _, in := range s.inputs {
		from := r.sourceLabel(in.source)
		tensors, err := fl.read(in.source)
		var bound *oip.LimitError
		switch {
		case err == nil:
		case errors.Is(err, bodies.ErrBudgetExceeded), errors.Is(err, oip.ErrBudgetExceeded):
			return payload{}, s.budgetFull("the request of "+s.label()+" could not be made", err)
		case errors.As(err, &bound):
			return payload{}, r.mappingFailure(s, in, from+" "+overBound(bound), err)
		default:
			return payload{}, r.mappingFailure(s, in, fmt.Sprintf("%s is not an Open Inference Protocol body", from), err)
		}
		t, ok := oip.Find(tensors, in.tensor)
		if !ok {
			return payload{}, r.mappingFailure(s, in, fmt.Sprintf("%s has no tensor %q", from, in.tensor), nil)
		}
		if want, ok := s.modelInput(in.name); ok {
			if err := oip.Fits(oip.TensorMetadata{Datatype: t.Datatype, Shape: t.Shape}, want); err != nil {
				return payload{}, r.mappingFailure(s, in, fmt.Sprintf("tensor %q of %s has %v", in.tensor, from, err), nil)
			}
		}
		mapped := *t
		mapped.Name = in.name
		binary = binary || mapped.Binary
		inputs = append(inputs, mapped)
	}
	// The request is written into its buffer as it is made: each block counted before it is
	// filled.
	out := bodies.NewBuffer(r.budget)
	hasBinary, err := oip.WriteRequest(out, inputs, binary)
	docLength := out.Len()
	for i := 0; err == nil && i < len(inputs); i++ {
		if t := &inputs[i]; t.Binary {
			k := s.inputs[i].source
			err = fl.bodies[k].body.WriteRange(out, fl.docLength[k]+t.Offset, t.Size)
		}
	}
	if err != nil {
		out.Release()
		if errors.Is(err, bodies.ErrBudgetExceeded) {
			return payload{}, s.budgetFull("the request of "+s.label()+" could not be made", err)
		}
		return payload{}, r.mappingFailure(s, s.inputs[0], "its tensors could not be copied", err)
	}
	p := payload{body: out, contentType: "application/json"}
	if hasBinary {
		p.contentType = "application/octet-stream"
		p.inferenceHeader = strconv.FormatInt(docLength, 10)
	}
	return p, nil
}

// overBound says, after the name of a body, which of the reader's bounds it is over, naming the
// configuration's field.
func overBound(e *oip.LimitError) string {
	switch e.Bound {
	case oip.BoundTensors:
		return fmt.Sprintf("has more than %d tensors (maxTensors)", e.Limit)
	case oip.BoundRank:
		return fmt.Sprintf("has a tensor whose shape has more than %d dimensions (maxTensorRank)", e.Limit)
	default:
		return fmt.Sprintf("has a tensor of more than %d parameters", e.Limit)
	}
}

// budgetFull is a failure of step s because the router holds maxBufferedBytes of bodies: what
// could not be done, and err, the detail.
func (s *step) budgetFull(what string, err error) *failure {
	s.metrics.failed(ReasonBufferBudget)
	return s.fail(ReasonBufferBudget, what+": the router holds maxBufferedBytes of bodies already", err)
}

// sourceLabel names source k for the caller.
func (r *Router) sourceLabel(k int) string {
	if k == 0 {
		return "the pipeline's request"
	}
	return "the answer of " + r.steps[k-1].label()
}

// mappingFailure is input in of step s that could not be made: what is wrong (what), in the
// caller's request (400) or in an earlier step's answer (502).
func (r *Router) mappingFailure(s *step, in input, what string, err error) *failure {
	message := fmt.Sprintf("input %q of %s: %s", in.name, s.label(), what)
	if err == nil {
		err = errors.New(message)
	}
	if in.source == 0 {
		return &failure{step: s.name, index: s.index, url: s.url, reason: ReasonBadRequest,
			status: http.StatusBadRequest, message: message, err: err}
	}
	s.metrics.failed(ReasonTensorMapping)
	return s.fail(ReasonTensorMapping, message, err)
}

// modelInput is the input named name of the step's model, as its metadata declares it; false
// before the metadata is read, or when it declares none of that name.
func (s *step) modelInput(name string) (oip.TensorMetadata, bool) {
	m := s.model.Load()
	if m == nil {
		return oip.TensorMetadata{}, false
	}
	return m.Input(name)
}

const (
	// maxDecodedElements bounds the elements of one tensor a stopWhen expression reads.
	maxDecodedElements = 1 << 20
	// decodedElementBytes is what one decoded element holds: a value in an interface, and for
	// JSON data the text of its number.
	decodedElementBytes = 64
)

// decodeTensors decodes the output tensors of a step's answer for its stopWhen expression,
// reading them with rd. What reading and decoding hold, the cost it returns, is acquired from
// rd's budget, before it is held, until the caller releases it. An answer that names an output
// twice is refused.
func (s *step) decodeTensors(resp *stepResponse, rd oip.Reader) (map[string][]any, int64, *failure) {
	const what = "the stopWhen condition of %s could not be evaluated"
	unreadable := func(err error) *failure {
		message := fmt.Sprintf(what, s.label()) + ": its answer's tensors could not be read"
		var bound *oip.LimitError
		if errors.As(err, &bound) {
			message = fmt.Sprintf(what, s.label()) + ": its answer " + overBound(bound)
		}
		s.metrics.failed(ReasonStopWhen)
		return s.fail(ReasonStopWhen, message, err)
	}
	if err := resp.body.Join(); err != nil {
		return nil, 0, s.budgetFull(fmt.Sprintf(what, s.label()), fmt.Errorf("join the response of POST %s for stopWhen: %w", s.url, err))
	}
	length, err := oip.ParseHeaderLength(resp.inferenceHeader)
	if err != nil {
		return nil, 0, unreadable(err)
	}
	doc, bin, err := oip.Split(resp.body.Bytes(), length)
	if err != nil {
		return nil, 0, unreadable(err)
	}
	outputs, held, err := rd.Response(doc, int64(len(bin)))
	switch {
	case errors.Is(err, oip.ErrBudgetExceeded):
		return nil, 0, s.budgetFull(fmt.Sprintf(what, s.label()), fmt.Errorf("read the tensors of POST %s for stopWhen: %w", s.url, err))
	case err != nil:
		return nil, 0, unreadable(fmt.Errorf("the response of POST %s: %w", s.url, err))
	}
	fail := func(f *failure) (map[string][]any, int64, *failure) {
		rd.Budget.Release(held)
		return nil, 0, f
	}
	var cost int64
	names := make(map[string]bool, len(outputs))
	for i := range outputs {
		t := &outputs[i]
		if names[t.Name] {
			return fail(unreadable(fmt.Errorf("the response of POST %s names the output %q twice", s.url, t.Name)))
		}
		names[t.Name] = true
		n := oip.Elements(t.Shape)
		if n > maxDecodedElements {
			return fail(unreadable(fmt.Errorf("the response of POST %s: tensor %s has %d elements, at most %d are decoded",
				s.url, t.Name, n, maxDecodedElements)))
		}
		cost += max(n, 0) * decodedElementBytes
		if t.Datatype == "BYTES" {
			// Each element a string: its bytes are copied, as many as the tensor's data.
			cost += t.Size + int64(len(t.Data))
		}
	}
	if !rd.Budget.TryAcquire(cost) {
		return fail(s.budgetFull(fmt.Sprintf(what, s.label()),
			fmt.Errorf("decode the tensors of POST %s for stopWhen (about %d bytes): %w", s.url, cost, bodies.ErrBudgetExceeded)))
	}
	tensors := make(map[string][]any, len(outputs))
	for i := range outputs {
		v, err := oip.Decode(&outputs[i], bin, maxDecodedElements)
		if err != nil {
			rd.Budget.Release(cost)
			return fail(unreadable(fmt.Errorf("the response of POST %s: %w", s.url, err)))
		}
		tensors[outputs[i].Name] = v
	}
	return tensors, held + cost, nil
}
