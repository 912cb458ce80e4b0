package oip

import (
	"errors"
	"fmt"
	"reflect"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// UnmarshalGRPCRequest decodes wire, a ModelInferRequest as it came, once its encoded form is
// within the Reader's bounds: protobuf makes every tensor, dimension and parameter of a message,
// and copies a packed list again for each part it comes in (time in the square of their
// number), so they are counted on the wire first. A message over a bound is a *LimitError; one
// whose decoded form the budget cannot hold (an estimate from the wire, charged before it is
// decoded) ErrBudgetExceeded; held is what it holds of the budget, to be released once the
// message is dropped.
func (r Reader) UnmarshalGRPCRequest(wire []byte) (*inferencepb.ModelInferRequest, int64, error) {
	m := new(inferencepb.ModelInferRequest)
	held, err := r.unmarshalGRPC(wire, requestWire, m)
	if err != nil {
		return nil, 0, err
	}
	return m, held, nil
}

// UnmarshalGRPCResponse decodes wire, a ModelInferResponse as it came, as UnmarshalGRPCRequest
// decodes a request.
func (r Reader) UnmarshalGRPCResponse(wire []byte) (*inferencepb.ModelInferResponse, int64, error) {
	m := new(inferencepb.ModelInferResponse)
	held, err := r.unmarshalGRPC(wire, answerWire, m)
	if err != nil {
		return nil, 0, err
	}
	return m, held, nil
}

// UnmarshalGRPCMetadata decodes wire, a ModelMetadataResponse as it came, once no shape of it
// is packed in more parts than an encoder writes (see UnmarshalGRPCRequest).
func UnmarshalGRPCMetadata(wire []byte) (*inferencepb.ModelMetadataResponse, error) {
	err := eachField(wire, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if (num != metadataInputs && num != metadataOutputs) || typ != protowire.BytesType {
			return nil
		}
		var shape list
		return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			if num != fieldShape {
				return nil
			}
			if err := shape.add(typ, protowire.VarintType, v); err != nil {
				return fmt.Errorf("shape: %w", err)
			}
			return nil
		})
	})
	m := new(inferencepb.ModelMetadataResponse)
	if err == nil {
		err = proto.Unmarshal(wire, m)
	}
	if err != nil {
		return nil, fmt.Errorf("not a ModelMetadataResponse: %w", err)
	}
	return m, nil
}

// unmarshalGRPC decodes wire, a message of the form given, into m once it is within the bounds
// and its cost is charged.
func (r Reader) unmarshalGRPC(wire []byte, form messageWire, m proto.Message) (int64, error) {
	c := wireCheck{maxTensors: r.MaxTensors, maxRank: r.MaxRank}
	if c.maxTensors <= 0 {
		c.maxTensors = DefaultMaxTensors
	}
	if c.maxRank <= 0 {
		c.maxRank = DefaultMaxRank
	}
	cost, err := c.message(wire, form)
	if err != nil {
		return 0, err
	}
	if r.Budget != nil && !r.Budget.TryAcquire(cost) {
		return 0, ErrBudgetExceeded
	}
	if err := proto.Unmarshal(wire, m); err != nil {
		if r.Budget != nil {
			r.Budget.Release(cost)
		}
		return 0, fmt.Errorf("not a %s: %w", form.name, err)
	}
	if r.Budget == nil {
		return 0, nil
	}
	return cost, nil
}

// messageWire is the encoding of a ModelInferRequest or a ModelInferResponse (the protocol's
// grpc_predict_v2.proto): the numbers of its fields the check reads.
type messageWire struct {
	name string
	// tensors are its inputs or outputs, listName their name in the REST protocol.
	tensors  protowire.Number
	listName string
	// requested are a request's requested outputs (0: none).
	requested protowire.Number
	raw       protowire.Number
	rawName   string
}

var (
	requestWire = messageWire{name: "ModelInferRequest", tensors: 5, listName: "inputs", requested: 6,
		raw: 7, rawName: "raw_input_contents"}
	answerWire = messageWire{name: "ModelInferResponse", tensors: 5, listName: "outputs", raw: 6,
		rawName: "raw_output_contents"}
)

// The fields shared by the messages and their tensors.
const (
	fieldParameters protowire.Number = 4
	// A tensor's shape, parameters and contents; a requested output's parameters.
	fieldShape              protowire.Number = 3
	fieldTensorParameters   protowire.Number = 4
	fieldContents           protowire.Number = 5
	fieldRequestedParameter protowire.Number = 2
	// A ModelMetadataResponse's inputs and outputs, whose shape is field 3 as a tensor's.
	metadataInputs  protowire.Number = 4
	metadataOutputs protowire.Number = 5
)

// contentsWidth is the size in memory of an element of each typed list of InferTensorContents,
// by field number (bool, int, int64, uint, uint64, fp32, fp64; bytes_contents a slice and what
// its bytes may be rounded up by).
var contentsWidth = [...]int64{1: 1, 2: 4, 3: 8, 4: 4, 5: 8, 6: 4, 7: 8, 8: bytesElementBytes}

// contentsWire is how each list of InferTensorContents is encoded when packed (bytes_contents
// never is).
var contentsWire = [...]protowire.Type{1: protowire.VarintType, 2: protowire.VarintType, 3: protowire.VarintType,
	4: protowire.VarintType, 5: protowire.VarintType, 6: protowire.Fixed32Type, 7: protowire.Fixed64Type,
	8: protowire.BytesType}

// contentsName names each list of InferTensorContents.
var contentsName = [...]string{1: "bool_contents", 2: "int_contents", 3: "int64_contents", 4: "uint_contents",
	5: "uint64_contents", 6: "fp32_contents", 7: "fp64_contents", 8: "bytes_contents"}

// maxPackedParts is the most parts a packed list of a message may come in: an encoder writes
// one, and protobuf copies the list made so far for each part it adds.
const maxPackedParts = 16

// What decoding a message allocates besides its bytes (the strings, bytes and unknown fields it
// copies, counted as their length), the estimate charged to the budget. Lists are made at their
// size from one packed part; from several parts, each part allocates the list again; element
// by element, by append, which allocates about five times the list's size as it grows.
const (
	pointerBytes   = 8
	appendFactor   = 6
	sizeClassSlack = 16
	// bytesElementBytes is an element of a list of bytes: its slice, and its bytes rounded up.
	bytesElementBytes = 24 + sizeClassSlack
	// grpcParameterBytes is an entry of a parameters map: its share of the map, its key and the
	// InferParameter of its value.
	grpcParameterBytes = 384
)

var (
	tensorObjectBytes    = int64(reflect.TypeFor[inferencepb.ModelInferRequest_InferInputTensor]().Size()) + appendFactor*pointerBytes + 4*sizeClassSlack
	requestedObjectBytes = int64(reflect.TypeFor[inferencepb.ModelInferRequest_InferRequestedOutputTensor]().Size()) + appendFactor*pointerBytes + 2*sizeClassSlack
	contentsObjectBytes  = int64(reflect.TypeFor[inferencepb.InferTensorContents]().Size()) + sizeClassSlack
)

// wireCheck walks a message's encoding without decoding it, counting what decoding would make.
type wireCheck struct {
	maxTensors, maxRank int
}

// message checks a ModelInferRequest or ModelInferResponse of the form given and returns what
// decoding it allocates.
func (c wireCheck) message(b []byte, form messageWire) (int64, error) {
	cost := int64(len(b))
	var (
		tensors, requested, parameters int
		raw                            list
	)
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case form.tensors:
			where := fmt.Sprintf("%s[%d]", form.listName, tensors)
			if tensors++; tensors > c.maxTensors {
				return &LimitError{Bound: BoundTensors, Limit: c.maxTensors, Where: form.listName}
			}
			n, err := c.tensor(v, where)
			cost += tensorObjectBytes + n
			return err
		case form.requested:
			if requested++; requested > c.maxTensors {
				return &LimitError{Bound: BoundTensors, Limit: c.maxTensors, Where: "outputs"}
			}
			n, err := parametersOf(v, fieldRequestedParameter, fmt.Sprintf("outputs[%d]", requested-1))
			cost += requestedObjectBytes + n
			return err
		case form.raw:
			if err := raw.add(typ, protowire.BytesType, v); err != nil {
				return err
			}
			if raw.n > int64(c.maxTensors) {
				return &LimitError{Bound: BoundTensors, Limit: c.maxTensors, Where: form.rawName}
			}
		case fieldParameters:
			if parameters++; parameters > MaxParameters {
				return &LimitError{Bound: BoundMessageParameters, Limit: MaxParameters, Where: "parameters"}
			}
			cost += grpcParameterBytes
		default:
			cost += sizeClassSlack
		}
		return nil
	})
	if err != nil {
		var bound *LimitError
		if errors.As(err, &bound) {
			return 0, err
		}
		return 0, fmt.Errorf("not a %s: %w", form.name, err)
	}
	return cost + raw.cost(bytesElementBytes), nil
}

// tensor checks an InferInputTensor or InferOutputTensor (where names it) and returns what
// decoding it allocates besides its bytes and its object.
func (c wireCheck) tensor(b []byte, where string) (int64, error) {
	cost, err := parametersOf(b, fieldTensorParameters, where)
	if err != nil {
		return 0, err
	}
	var (
		shape    list
		contents *[len(contentsWidth)]list
	)
	err = eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == fieldShape:
			if err := shape.add(typ, protowire.VarintType, v); err != nil {
				return fmt.Errorf("%s: shape: %w", where, err)
			}
			if shape.n > int64(c.maxRank) {
				return &LimitError{Bound: BoundRank, Limit: c.maxRank, Where: where}
			}
		case num == fieldContents && typ == protowire.BytesType:
			// Contents given more than once are merged into one: they are counted as one.
			if contents == nil {
				contents = new([len(contentsWidth)]list)
				cost += contentsObjectBytes
			}
			err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num < 1 || int(num) >= len(contentsWidth) {
					return nil
				}
				if err := contents[num].add(typ, contentsWire[num], v); err != nil {
					return fmt.Errorf("%s: %w", contentsName[num], err)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s: contents: %w", where, err)
			}
		case typ == protowire.BytesType:
			cost += sizeClassSlack
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	cost += shape.cost(8)
	if contents != nil {
		for num := range contents {
			cost += contents[num].cost(contentsWidth[num])
		}
	}
	return cost, nil
}

// list counts the elements of a repeated field of a message, and how they came.
type list struct {
	n, parts int64
	appended bool
}

// add counts a field of wire type typ with value v of a list whose elements are of wire type
// want: one element, or when want is not BytesType a packed part. A field of another wire type
// is not the list's (protobuf keeps it as an unknown field).
func (l *list) add(typ, want protowire.Type, v []byte) error {
	switch typ {
	case want:
		l.n++
		l.appended = true
	case protowire.BytesType:
		n, err := packedElements(want, v)
		if err != nil {
			return err
		}
		if l.parts++; l.parts > maxPackedParts {
			return fmt.Errorf("packed in more than %d parts", maxPackedParts)
		}
		l.n += n
	}
	return nil
}

// cost is what decoding the list allocates, of elements width bytes each.
func (l *list) cost(width int64) int64 {
	factor := l.parts
	if l.appended {
		factor += appendFactor
	}
	return factor * l.n * width
}

// packedElements counts the elements of a packed list of encoding want (varint, fixed32 or
// fixed64).
func packedElements(want protowire.Type, v []byte) (int64, error) {
	switch want {
	case protowire.Fixed32Type, protowire.Fixed64Type:
		size := 4
		if want == protowire.Fixed64Type {
			size = 8
		}
		if len(v)%size != 0 {
			return 0, fmt.Errorf("a packed list of %d bytes is not of %d-byte elements", len(v), size)
		}
		return int64(len(v) / size), nil
	default:
		var n int64
		for _, c := range v {
			if c < 0x80 {
				n++
			}
		}
		if len(v) > 0 && v[len(v)-1] >= 0x80 {
			return 0, errors.New("a packed list ends inside a varint")
		}
		return n, nil
	}
}

// parametersOf counts the entries of the parameters map (field num) of message b, refusing
// more than MaxParameters, and returns what they hold.
func parametersOf(b []byte, num protowire.Number, where string) (int64, error) {
	var n int64
	err := eachField(b, func(f protowire.Number, typ protowire.Type, _ []byte) error {
		if f != num || typ != protowire.BytesType {
			return nil
		}
		if n++; n > MaxParameters {
			return &LimitError{Bound: BoundParameters, Limit: MaxParameters, Where: where}
		}
		return nil
	})
	return n * grpcParameterBytes, err
}

// eachField calls f with each field of message b: its number, wire type and value (a
// length-delimited field's contents; else the encoded value), stopping at f's first error.
func eachField(b []byte, f func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		v := b[:m]
		if typ == protowire.BytesType {
			v, _ = protowire.ConsumeBytes(v)
		}
		if err := f(num, typ, v); err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}
