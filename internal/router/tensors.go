package router

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
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

// output is one tensor of the pipeline's answer.
type output struct {
	// name is its name in the answer.
	name string
	// source is the step whose answer has it (from 1).
	source int
	// tensor is its name there.
	tensor string
}

// input is one mapped input of a step's request.
type input struct {
	// name is the input of the step's model.
	name string
	// source is where the tensor is: 0 for the pipeline's request, k for step k's answer.
	source int
	// tensor is its name there.
	tensor string
}

// flow is the bodies of one request that steps read (the pipeline's request and the steps'
// answers), each held until the last step reading it is done with it, and the tensors of those
// steps map inputs from, read once as they arrive.
type flow struct {
	g       *graph
	sources []source
	reader  oip.Reader
}

// source is one body of a request's flow.
type source struct {
	body payload
	// uses counts the steps still to read it.
	uses int
	// tensors are its tensors once read, or err why they could not be.
	tensors []oip.Tensor
	err     error
	// docLength is the length of its JSON document, read: where the bytes of its binary
	// tensors start.
	docLength int64
	// held is what reading it holds besides its body (the tensors, and a copy of its JSON
	// document when that spans several blocks), counted against the budget until the body is
	// released.
	held int64
}

// startFlow makes fl the flow of one request, reading tensors with rd (which charges its
// budget).
func (g *graph) startFlow(fl *flow, rd oip.Reader) {
	*fl = flow{g: g, sources: make([]source, len(g.users)), reader: rd}
	for k := range fl.sources {
		fl.sources[k].uses = g.users[k]
	}
}

// keep holds p, the body of source k, for the steps that read it (released at once when none
// does), and reads its tensors when a step maps from it: before any step is sent the body, so
// that reading (which may join its blocks) never runs beside a call that sends it.
func (fl *flow) keep(k int, p payload) {
	src := &fl.sources[k]
	if src.uses == 0 {
		p.body.Release()
		return
	}
	src.body = p
	if fl.g.mapped[k] {
		src.err = fl.read(k)
	}
}

// use says a step is done with source k: the last one releases it.
func (fl *flow) use(k int) {
	src := &fl.sources[k]
	if src.uses--; src.uses == 0 {
		fl.drop(src)
	}
}

func (fl *flow) drop(src *source) {
	src.body.body.Release()
	fl.reader.Budget.Release(src.held)
	*src = source{}
}

// release releases every body the flow holds.
func (fl *flow) release() {
	for k := range fl.sources {
		if fl.sources[k].body.body != nil {
			fl.drop(&fl.sources[k])
		}
	}
}

// read reads the tensors of source k: the request's inputs or a step's outputs. A body all
// JSON is joined into one slice and read whole; under the binary data extension only its JSON
// header is read, and the tensors' bytes stay where they are until copied into a request.
// What reading holds is charged as it reads: the tensors, within the reader's bounds, refer
// to the body's bytes.
func (fl *flow) read(k int) error {
	src := &fl.sources[k]
	p := src.body
	length, err := oip.ParseHeaderLength(p.inferenceHeader)
	if err != nil {
		return err
	}
	if length > p.body.Len() {
		return fmt.Errorf("%s is %d, the body has %d bytes", oip.HeaderInferenceHeaderLength, length, p.body.Len())
	}
	var (
		doc    []byte
		copied int64
	)
	if length < 0 {
		if err := p.body.Join(); err != nil {
			return err
		}
		doc, length = p.body.Bytes(), p.body.Len()
	} else {
		if p.body.PrefixCopies(length) {
			// A header that spans several blocks is read from a copy.
			if !fl.reader.Budget.TryAcquire(length) {
				return bodies.ErrBudgetExceeded
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
		return err
	}
	src.tensors, src.docLength, src.held = tensors, length, copied+held
	return nil
}

// request builds the request of step s from the tensors its inputs map, each checked against
// the input the step's model declares. A request that lacks a tensor, or whose tensor does not
// fit, is the caller's error (400); a step answer that does is a failure of the pipeline (502).
// The bytes of binary tensors are copied from the bodies they are in to the request's.
func (r *Router) request(fl *flow, s *step) (payload, *failure) {
	inputs := make([]oip.Tensor, 0, len(s.inputs))
	sources := make([]int, 0, len(s.inputs))
	for _, in := range s.inputs {
		from := r.sourceLabel(in.source)
		t, what, err := fl.tensor(in.source, in.tensor, from)
		if errors.Is(err, errBudget) {
			return payload{}, s.budgetFull("the request of "+s.label()+" could not be made", err)
		}
		if what != "" {
			return payload{}, r.mappingFailure(s, in, what, err)
		}
		if want, ok := s.modelInput(in.name); ok {
			if err := oip.Fits(oip.TensorMetadata{Datatype: t.Datatype, Shape: t.Shape}, want); err != nil {
				return payload{}, r.mappingFailure(s, in, fmt.Sprintf("tensor %q of %s has %v", in.tensor, from, err), nil)
			}
		}
		mapped := *t
		mapped.Name = in.name
		inputs = append(inputs, mapped)
		sources = append(sources, in.source)
	}
	p, err := fl.write(r.budget, inputs, sources, func(w io.Writer, binary bool) error {
		_, err := oip.WriteRequest(w, inputs, s.outputs, binary)
		return err
	})
	switch {
	case errors.Is(err, bodies.ErrBudgetExceeded):
		return payload{}, s.budgetFull("the request of "+s.label()+" could not be made", err)
	case err != nil:
		return payload{}, r.mappingFailure(s, s.inputs[0], "its tensors could not be copied", err)
	}
	return p, nil
}

// answer builds the pipeline's answer from the tensors of its outputs: an Open Inference
// Protocol answer of the model named after the Pipeline. A step answer that lacks a tensor is a
// failure of the pipeline (502), counted as the step's.
func (r *Router) answer(fl *flow) (*stepResponse, *failure) {
	outputs := make([]oip.Tensor, 0, len(r.outputs))
	sources := make([]int, 0, len(r.outputs))
	for _, out := range r.outputs {
		s := r.steps[out.source-1]
		t, what, err := fl.tensor(out.source, out.tensor, r.sourceLabel(out.source))
		if errors.Is(err, errBudget) {
			return nil, s.budgetFull("the pipeline's answer could not be made", err)
		}
		if what != "" {
			return nil, r.answerFailure(s, out, what, err)
		}
		picked := *t
		picked.Name = out.name
		outputs = append(outputs, picked)
		sources = append(sources, out.source)
	}
	p, err := fl.write(r.budget, outputs, sources, func(w io.Writer, _ bool) error {
		_, err := oip.WriteResponse(w, r.modelName, outputs)
		return err
	})
	switch {
	case errors.Is(err, bodies.ErrBudgetExceeded):
		return nil, r.steps[r.outputs[0].source-1].budgetFull("the pipeline's answer could not be made", err)
	case err != nil:
		return nil, r.answerFailure(r.steps[r.outputs[0].source-1], r.outputs[0], "its tensors could not be copied", err)
	}
	header := http.Header{}
	if p.inferenceHeader != "" {
		header[oip.HeaderInferenceHeaderLength] = []string{p.inferenceHeader}
	}
	return &stepResponse{payload: p, status: http.StatusOK, header: header}, nil
}

// answerFailure is output out of the pipeline's answer that could not be made from the answer of
// step s: what is wrong (what).
func (r *Router) answerFailure(s *step, out output, what string, err error) *failure {
	message := fmt.Sprintf("output %q of the pipeline's answer: %s", out.name, what)
	if err == nil {
		err = errors.New(message)
	}
	s.metrics.failed(ReasonTensorMapping)
	return s.fail(ReasonTensorMapping, message, err)
}

// errBudget marks an error of reading tensors because the budget was full.
var errBudget = errors.New("the budget is full")

// tensor is the tensor named name of source k (from, for messages), read as it arrived. When
// it cannot be had, what says why, for the caller, and err is the detail: wrapping errBudget
// when the budget was full.
func (fl *flow) tensor(k int, name, from string) (*oip.Tensor, string, error) {
	src := &fl.sources[k]
	var bound *oip.LimitError
	switch err := src.err; {
	case err == nil:
	case errors.Is(err, bodies.ErrBudgetExceeded), errors.Is(err, oip.ErrBudgetExceeded):
		return nil, "", fmt.Errorf("%w: %w", errBudget, err)
	case errors.As(err, &bound):
		return nil, from + " " + overBound(bound), err
	default:
		return nil, from + " is not an Open Inference Protocol body", err
	}
	t, ok := oip.Find(src.tensors, name)
	if !ok {
		return nil, fmt.Sprintf("%s has no tensor %q", from, name), nil
	}
	return t, "", nil
}

// write writes a document of tensors (tensors[i] from source sources[i]) with doc, which is
// told whether a tensor is binary, into a new buffer counted against bg: the bytes of binary
// tensors are copied after it from the bodies they are in. Each block is counted before it is
// filled.
func (fl *flow) write(bg *bodies.Budget, tensors []oip.Tensor, sources []int, doc func(io.Writer, bool) error) (payload, error) {
	binary := slices.ContainsFunc(tensors, func(t oip.Tensor) bool { return t.Binary })
	out := bodies.NewBuffer(bg)
	err := doc(out, binary)
	docLength := out.Len()
	for i := 0; err == nil && i < len(tensors); i++ {
		if t := &tensors[i]; t.Binary {
			src := &fl.sources[sources[i]]
			err = src.body.body.WriteRange(out, src.docLength+t.Offset, t.Size)
		}
	}
	if err != nil {
		out.Release()
		return payload{}, err
	}
	p := payload{body: out, contentType: "application/json"}
	if binary {
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
	case oip.BoundMessageParameters:
		return fmt.Sprintf("has more than %d parameters", e.Limit)
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
