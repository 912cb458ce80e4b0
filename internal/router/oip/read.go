package oip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/ndsl-cn/pipeline-operator/internal/router/jsonscan"
)

// Defaults of a Reader's bounds, and the bound on a tensor's parameters.
const (
	// DefaultMaxTensors is how many tensors a body may list when Reader.MaxTensors is 0. A
	// model's inputs or outputs are a few, and a few hundred for the largest language models
	// that take their attention cache as tensors (a key and a value per layer).
	DefaultMaxTensors = 1024
	// DefaultMaxRank is how many dimensions a shape may have when Reader.MaxRank is 0: NumPy's
	// bound before its version 2, and so what the Python model servers (KServe, MLServer) can
	// hold; TensorRT's is 8.
	DefaultMaxRank = 32
	// MaxParameters is how many parameters a tensor may have: the protocol's are a handful
	// (binary_data_size, the shared memory ones, content_type).
	MaxParameters = 64
)

// What reading holds besides the document, charged to a Reader's Budget as it reads: each
// tensor (the array of tensors grows by doubling, and each array made is charged), each
// dimension of a shape, each parameter (an entry of a map) and the strings copied out of the
// document (names, datatypes, parameter names). The data of a tensor, and its parameters'
// values, are not copied: they are parts of the document.
var tensorBytes = int64(reflect.TypeFor[Tensor]().Size())

const (
	dimensionBytes = 8
	parameterBytes = 96
	// mapBytes is a map of parameters, besides its entries.
	mapBytes = 256
)

// Bound names a bound of the Reader: what a LimitError is over.
type Bound string

// The Reader's bounds.
const (
	BoundTensors    Bound = "tensors"
	BoundRank       Bound = "rank"
	BoundParameters Bound = "parameters"
	// BoundMessageParameters bounds the parameters of a gRPC message itself (the REST
	// protocol's are not read).
	BoundMessageParameters Bound = "message parameters"
)

// LimitError is a body over one of the Reader's bounds.
type LimitError struct {
	// Bound is the bound it is over, Limit its value.
	Bound Bound
	Limit int
	// Where is the list ("inputs", "outputs") or the tensor ("outputs[3] (name)") over it.
	Where string
}

func (e *LimitError) Error() string {
	switch e.Bound {
	case BoundTensors:
		return fmt.Sprintf("%s has more than %d tensors", e.Where, e.Limit)
	case BoundRank:
		return fmt.Sprintf("%s: a shape of more than %d dimensions", e.Where, e.Limit)
	case BoundMessageParameters:
		return fmt.Sprintf("more than %d parameters", e.Limit)
	default:
		return fmt.Sprintf("%s: more than %d parameters", e.Where, e.Limit)
	}
}

// ErrBudgetExceeded is a body whose tensors the Reader's Budget cannot hold.
var ErrBudgetExceeded = errors.New("the budget cannot hold the tensors read")

// Budget counts what a Reader holds (a bodies.Budget).
type Budget interface {
	// TryAcquire counts n more bytes and reports true when they fit, counts nothing and
	// reports false when they do not.
	TryAcquire(n int64) bool
	// Release gives back n bytes TryAcquire counted.
	Release(n int64)
}

// Reader reads the tensors of bodies within bounds, charging what it holds to a budget before
// it holds it. The zero value has the default bounds and charges nothing.
type Reader struct {
	// MaxTensors bounds the tensors of a request's inputs or an answer's outputs
	// (DefaultMaxTensors when 0).
	MaxTensors int
	// MaxRank bounds the dimensions of a tensor's shape (DefaultMaxRank when 0).
	MaxRank int
	// Budget is charged what reading holds (nil: nothing is charged).
	Budget Budget
}

// Request reads the input tensors of a request's JSON document, followed by binary bytes of
// binary tensors. The tensors' data and parameters are parts of doc, valid while it is. held
// is what it charged to the budget, to release once the tensors are dropped; on an error it
// holds nothing. A body over a bound is a *LimitError, one the budget cannot hold
// ErrBudgetExceeded.
func (r Reader) Request(doc []byte, binary int64) (tensors []Tensor, held int64, err error) {
	return r.read(doc, binary, "inputs")
}

// Response reads the output tensors of an answer's JSON document, as Request does a request's.
func (r Reader) Response(doc []byte, binary int64) (tensors []Tensor, held int64, err error) {
	return r.read(doc, binary, "outputs")
}

// ParseRequest reads the input tensors of a request with the default bounds, charging nothing.
func ParseRequest(doc []byte, binary int64) ([]Tensor, error) {
	t, _, err := Reader{}.Request(doc, binary)
	return t, err
}

// ParseResponse reads the output tensors of an answer with the default bounds, charging
// nothing.
func ParseResponse(doc []byte, binary int64) ([]Tensor, error) {
	t, _, err := Reader{}.Response(doc, binary)
	return t, err
}

// read reads the tensors of list. It reads as encoding/json would decode the body into a
// struct of that list, with the same grammar, the same names (matched without regard to case)
// and the same values, but that of keys given twice, the last wins whole; and it holds
// nothing beyond its bounds. The document is checked first (json.Valid holds nothing), then
// walked.
func (r Reader) read(doc []byte, binary int64, list string) ([]Tensor, int64, error) {
	if !json.Valid(doc) {
		// For the error's words only: a document that is not valid is not decoded.
		var v struct{}
		return nil, 0, fmt.Errorf("not an Open Inference Protocol body: %w", json.Unmarshal(doc, &v))
	}
	w := walker{doc: doc, budget: r.Budget, maxTensors: r.MaxTensors, maxRank: r.MaxRank}
	if w.maxTensors <= 0 {
		w.maxTensors = DefaultMaxTensors
	}
	if w.maxRank <= 0 {
		w.maxRank = DefaultMaxRank
	}
	tensors, err := w.body(list)
	if err == nil {
		err = binaryTensors(tensors, binary, list)
	}
	if err != nil {
		w.release()
		return nil, 0, err
	}
	return tensors, w.held, nil
}

// binaryTensors finds the data of the tensors under the binary data extension, in their
// order in the binary bytes after the document, and checks every other has data.
func binaryTensors(tensors []Tensor, binary int64, list string) error {
	var offset int64
	for i := range tensors {
		t := &tensors[i]
		raw, ok := t.Parameters[binaryDataSize]
		if !ok {
			if t.Data == nil || bytes.Equal(t.Data, []byte("null")) {
				return fmt.Errorf("%s[%d] (%s): no data", list, i, t.Name)
			}
			continue
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%s[%d] (%s): %s %s is not a size", list, i, t.Name, binaryDataSize, raw)
		}
		if n > binary-offset {
			return fmt.Errorf("%s[%d] (%s): %s is %d, %d bytes are left", list, i, t.Name, binaryDataSize, n, binary-offset)
		}
		t.Binary, t.Offset, t.Size, t.Data = true, offset, n, nil
		offset += n
		delete(t.Parameters, binaryDataSize)
	}
	if offset < binary {
		return fmt.Errorf("%d bytes after the tensors the body declares", binary-offset)
	}
	return nil
}

// walker reads a valid JSON document: it does not check the grammar again.
type walker struct {
	doc        []byte
	budget     Budget
	held       int64
	maxTensors int
	maxRank    int
	// dims holds a shape's dimensions while they are read, before they are counted.
	dims []int64
}

// charge acquires n bytes from the budget before they are held.
func (w *walker) charge(n int64) error {
	if w.budget == nil {
		return nil
	}
	if !w.budget.TryAcquire(n) {
		return ErrBudgetExceeded
	}
	w.held += n
	return nil
}

func (w *walker) release() {
	if w.budget != nil && w.held > 0 {
		w.budget.Release(w.held)
	}
	w.held = 0
}

// body reads the tensors of list from the document's top-level object.
func (w *walker) body(list string) ([]Tensor, error) {
	notOIP := "not an Open Inference Protocol body: "
	i := jsonscan.SkipSpace(w.doc, 0)
	switch w.doc[i] {
	case 'n':
		return nil, errors.New(notOIP + "no " + list)
	case '{':
	default:
		return nil, errors.New(notOIP + "not a JSON object")
	}
	var (
		tensors []Tensor
		found   bool
	)
	err := w.members(i, func(key []byte, v, _ int) error {
		if !keyIs(key, list) {
			return nil
		}
		var err error
		tensors, err = w.tensors(v, list)
		found = true
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case !found || tensors == nil:
		return nil, errors.New(notOIP + "no " + list)
	}
	return tensors, nil
}

// tensors reads the list of tensors at v: null, or an array of at most maxTensors tensors.
func (w *walker) tensors(v int, list string) ([]Tensor, error) {
	switch w.doc[v] {
	case 'n':
		return nil, nil
	case '[':
	default:
		return nil, fmt.Errorf("not an Open Inference Protocol body: %s is not a list", list)
	}
	tensors := []Tensor{}
	err := w.elements(v, func(e, _ int) error {
		i := len(tensors)
		if i == w.maxTensors {
			return &LimitError{Bound: BoundTensors, Limit: w.maxTensors, Where: list}
		}
		if i == cap(tensors) {
			grown := min(max(2*cap(tensors), 4), w.maxTensors)
			if err := w.charge(int64(grown) * tensorBytes); err != nil {
				return err
			}
			tensors = append(make([]Tensor, 0, grown), tensors...)
		}
		tensors = tensors[:i+1]
		switch w.doc[e] {
		case 'n':
			return nil
		case '{':
			return w.tensor(e, &tensors[i], list, i)
		default:
			return fmt.Errorf("%s[%d]: not an object", list, i)
		}
	})
	return tensors, err
}

// tensor reads the object at o into t, tensor i of list.
func (w *walker) tensor(o int, t *Tensor, list string, i int) error {
	where := func() string { return fmt.Sprintf("%s[%d] (%s)", list, i, t.Name) }
	return w.members(o, func(key []byte, v, end int) error {
		var err error
		switch {
		case keyIs(key, "name"):
			err = w.stringField(v, end, &t.Name)
		case keyIs(key, "datatype"):
			err = w.stringField(v, end, &t.Datatype)
		case keyIs(key, "shape"):
			t.Shape, err = w.shape(v, where)
		case keyIs(key, "parameters"):
			t.Parameters, err = w.parameters(v, t.Parameters, where)
		case keyIs(key, "data"):
			t.Data = json.RawMessage(w.doc[v:end:end])
			return nil
		default:
			return nil
		}
		if err != nil && !isBound(err) {
			err = fmt.Errorf("%s: %s: %w", where(), key, err)
		}
		return err
	})
}

// isBound reports whether err is the budget's or a bound's, which say where they are.
func isBound(err error) bool {
	var le *LimitError
	return errors.Is(err, ErrBudgetExceeded) || errors.As(err, &le)
}

// stringField reads the string at [v, end) into s: null leaves s as it is.
func (w *walker) stringField(v, end int, s *string) error {
	switch w.doc[v] {
	case 'n':
		return nil
	case '"':
		str, err := w.string(w.doc[v:end])
		if err == nil {
			*s = str
		}
		return err
	default:
		return errors.New("not a string")
	}
}

// string is the string whose quoted text is q, copied: charged first.
func (w *walker) string(q []byte) (string, error) {
	raw := q[1 : len(q)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		if err := w.charge(int64(len(raw))); err != nil {
			return "", err
		}
		return string(raw), nil
	}
	// Escapes make a string shorter; each byte of invalid UTF-8 becomes three.
	if err := w.charge(3 * int64(len(raw))); err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return "", err
	}
	return s, nil
}

// shape reads the shape at v: null, or an array of at most maxRank integers (null is 0).
func (w *walker) shape(v int, where func() string) ([]int64, error) {
	switch w.doc[v] {
	case 'n':
		return nil, nil
	case '[':
	default:
		return nil, errors.New("not a list")
	}
	w.dims = w.dims[:0]
	err := w.elements(v, func(e, end int) error {
		if len(w.dims) == w.maxRank {
			return &LimitError{Bound: BoundRank, Limit: w.maxRank, Where: where()}
		}
		d, ok := int64(0), true
		if w.doc[e] != 'n' {
			d, ok = parseInt(w.doc[e:end])
		}
		if !ok {
			return fmt.Errorf("%s is not a dimension", w.doc[e:end])
		}
		w.dims = append(w.dims, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := w.charge(dimensionBytes * int64(len(w.dims))); err != nil {
		return nil, err
	}
	return append(make([]int64, 0, len(w.dims)), w.dims...), nil
}

// parseInt reads a JSON number that is an int64, as encoding/json does into one: no fraction,
// no exponent.
func parseInt(b []byte) (int64, bool) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= 1<<63:
		return int64(-n), true // -(1<<63) wraps to itself, the least int64
	case !neg && n < 1<<63:
		return int64(n), true
	}
	return 0, false
}

// parameters reads the parameters at v into m (a second "parameters" of a tensor adds to the
// first, as encoding/json does; null empties them), each value the text it is.
func (w *walker) parameters(v int, m map[string]json.RawMessage, where func() string) (map[string]json.RawMessage, error) {
	switch w.doc[v] {
	case 'n':
		return nil, nil
	case '{':
	default:
		return nil, errors.New("not an object")
	}
	n := 0
	_ = w.members(v, func([]byte, int, int) error { n++; return nil })
	if n > MaxParameters {
		return nil, &LimitError{Bound: BoundParameters, Limit: MaxParameters, Where: where()}
	}
	if m == nil {
		if err := w.charge(mapBytes); err != nil {
			return nil, err
		}
		m = make(map[string]json.RawMessage, n)
	}
	err := w.members(v, func(key []byte, v, end int) error {
		k, err := w.string(key)
		if err != nil {
			return err
		}
		if _, ok := m[k]; !ok {
			if len(m) == MaxParameters {
				return &LimitError{Bound: BoundParameters, Limit: MaxParameters, Where: where()}
			}
			if err := w.charge(parameterBytes); err != nil {
				return err
			}
		}
		m[k] = json.RawMessage(w.doc[v:end:end])
		return nil
	})
	return m, err
}

// members calls f with each member of the object at o, in order: its key's quoted text, and
// where its value starts and ends. It stops at f's first error.
func (w *walker) members(o int, f func(key []byte, v, end int) error) error {
	b := w.doc
	i := jsonscan.SkipSpace(b, o+1)
	if b[i] == '}' {
		return nil
	}
	for {
		i = jsonscan.SkipSpace(b, i)
		k := i
		i = jsonscan.StringEnd(b, i+1) + 1
		key := b[k:i]
		i = jsonscan.SkipSpace(b, jsonscan.SkipSpace(b, i)+1) // the colon, and the space around it
		end := jsonscan.SkipValue(b, i)
		if err := f(key, i, end); err != nil {
			return err
		}
		i = jsonscan.SkipSpace(b, end)
		if b[i] != ',' {
			return nil
		}
		i++
	}
}

// elements calls f with where each element of the array at a starts and ends, in order. It
// stops at f's first error.
func (w *walker) elements(a int, f func(e, end int) error) error {
	b := w.doc
	i := jsonscan.SkipSpace(b, a+1)
	if b[i] == ']' {
		return nil
	}
	for {
		i = jsonscan.SkipSpace(b, i)
		end := jsonscan.SkipValue(b, i)
		if err := f(i, end); err != nil {
			return err
		}
		i = jsonscan.SkipSpace(b, end)
		if b[i] != ',' {
			return nil
		}
		i++
	}
}

// keyIs reports whether the quoted key is name, without regard to case, as encoding/json
// matches a key to a field (bytes.EqualFold). A key longer than any escaped form of a name
// is not decoded.
func keyIs(quoted []byte, name string) bool {
	raw := quoted[1 : len(quoted)-1]
	if len(raw) == len(name) && bytes.EqualFold(raw, []byte(name)) {
		return true
	}
	plain := bytes.IndexByte(raw, '\\') < 0
	for _, c := range raw {
		if c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain || len(raw) > 6*len(name) {
		return false
	}
	var key string
	return json.Unmarshal(quoted, &key) == nil && bytes.EqualFold([]byte(key), []byte(name))
}
