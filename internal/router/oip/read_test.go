package oip

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// unmarshalTensors is how the tensors of list were read before Reader: encoding/json into a
// struct of that list.
func unmarshalTensors(doc []byte, list string) ([]Tensor, error) {
	var b struct {
		Inputs  []Tensor `json:"inputs"`
		Outputs []Tensor `json:"outputs"`
	}
	var err error
	if list == "inputs" {
		err = json.Unmarshal(doc, &struct {
			Inputs *[]Tensor `json:"inputs"`
		}{&b.Inputs})
	} else {
		err = json.Unmarshal(doc, &struct {
			Outputs *[]Tensor `json:"outputs"`
		}{&b.Outputs})
	}
	if err != nil {
		return nil, err
	}
	if list == "inputs" {
		return b.Inputs, nil
	}
	return b.Outputs, nil
}

// hasDuplicateKeys reports whether an object of the valid document doc has two keys that
// encoding/json would take for the same: it merges what they hold, the Reader keeps the last.
func hasDuplicateKeys(doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		object bool
		key    bool // the next string token is a key
		keys   map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok {
		case json.Delim('{'):
			if top != nil && top.object {
				top.key = true
			}
			stack = append(stack, &frame{object: true, key: true, keys: map[string]bool{}})
			continue
		case json.Delim('['):
			if top != nil && top.object {
				top.key = true
			}
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.object {
			if top.key {
				k := strings.ToUpper(strings.ToLower(tok.(string)))
				if top.keys[k] {
					return true
				}
				top.keys[k] = true
			}
			top.key = !top.key
		}
	}
}

// budget is a Budget of limit bytes that counts what it holds at most.
type budget struct {
	limit, used, peak atomic.Int64
}

func newBudget(limit int64) *budget {
	b := &budget{}
	b.limit.Store(limit)
	return b
}

func (b *budget) TryAcquire(n int64) bool {
	if b.used.Add(n) > b.limit.Load() {
		b.used.Add(-n)
		return false
	}
	for {
		p := b.peak.Load()
		if u := b.used.Load(); u <= p || b.peak.CompareAndSwap(p, u) {
			return true
		}
	}
}

func (b *budget) Release(n int64) { b.used.Add(-n) }

var readSeeds = []string{
	`{"inputs":[{"name":"a","shape":[1,2],"datatype":"FP32","data":[1,2]}]}`,
	`{"outputs":[{"name":"a","shape":[2],"datatype":"INT64","parameters":{"content_type":"np","x":null},"data":[1,2]}]}`,
	`{"INPUTS":[{"Name":"a","SHAPE":[1],"DataType":"BYTES","Data":["x"]}], "outputs": 5}`,
	`{"inputs":[{"name":"a","shape":[1,null,-0,9223372036854775807,-9223372036854775808],"datatype":"FP32","data":[1]}]}`,
	`{"inputs":[{"name":"a","shape":[9223372036854775808],"datatype":"FP32","data":[1]}]}`,
	`{"inputs":[{"name":"a","shape":[1.0],"datatype":"FP32","data":[1]}]}`,
	`{"inputs":[{"name":"a","shape":[1e2],"datatype":"FP32","data":[1]}]}`,
	`{"inputs":[{"name":5,"shape":[1],"datatype":"FP32","data":[1]}]}`,
	`{"inputs":[null, {"name":"b","data":[]}]}`,
	`{"inputs":[1]}`,
	`{"inputs":null}`,
	`{"inputs":[]}`,
	`null`,
	`[]`,
	`"inputs"`,
	`{"\u0069nputs":[{"n\u0061me":"\u00e9\ud83d\ude00","shape":[],"datatype":"FP32","data":{"a":[1]}}]}`,
	`{"ınputs":[{"name":"a","data":1}],"inputs":[{"ſhape":[3],"data":1}]}`,
	"{\"inputs\":[{\"name\":\"a\xffb\",\"data\":1,\"parameters\":{\"k\xfe\":\"v\xfd\"}}]}",
	`{"inputs":[{"name":"a","data":1,"parameters":{"a":1},"parameters":{"b":2}}]}`,
	`{"inputs":[{"name":"a","data":1,"parameters":{"a":1},"parameters":null}]}`,
	`{"inputs":[{"name":"a","data":1,"parameters":[]}]}`,
	`{"inputs":[{"name":"a","data":1,"shape":[1],"shape":null,"name":null}]}`,
	` { "inputs" : [ { "name" : "a" , "data" : [ 1 , 2 ] , "parameters" : { "binary_data_size" : 4 } } ] } `,
	`{"inputs":[{"name":"a","data":"\"]}\\"}]}`,
	`{"inputs":[{"name":"a","shape":"x","data":1}]}`,
	`{"inputs":[{"name":"a","shape":[1,"2"],"data":1}]}`,
	`{"inputs":[{"name":"a","shape":[1,[2]],"data":1}]}`,
	`{"inputs":{"name":"a"}}`,
	`{"inputs":[{"name":"a","data":1}]`,
	`{"inputs":[{"name":"a","data":01}]}`,
}

// FuzzReaderReadsAsEncodingJSON checks that a Reader reads what encoding/json decodes, or refuses
// what it refuses, but for keys given twice and the bound on parameters.
func FuzzReaderReadsAsEncodingJSON(f *testing.F) {
	for _, s := range readSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(strings.ReplaceAll(s, "inputs", "outputs")), true)
	}
	f.Fuzz(func(t *testing.T, doc []byte, outputs bool) {
		list := "inputs"
		if outputs {
			list = "outputs"
		}
		bg := newBudget(1 << 40)
		r := Reader{MaxTensors: 1 << 20, MaxRank: 1 << 20, Budget: bg}
		got, held, err := r.read(doc, 0, list)
		if err != nil && held != 0 || bg.used.Load() != held {
			t.Fatalf("held %d, the budget counts %d (error %v)", held, bg.used.Load(), err)
		}
		var le *LimitError
		if errors.As(err, &le) && le.Bound == BoundParameters {
			return // encoding/json has no such bound
		}
		want, werr := unmarshalTensors(doc, list)
		if werr == nil && want == nil {
			werr = errors.New("no " + list)
		}
		if werr == nil {
			werr = binaryTensors(want, 0, list)
		}
		if (err == nil) != (werr == nil) {
			if json.Valid(doc) && hasDuplicateKeys(doc) {
				return
			}
			t.Fatalf("%q: Reader error %v, encoding/json error %v", doc, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) && !hasDuplicateKeys(doc) {
			t.Fatalf("%q:\nReader       %#v\nencoding/json %#v", doc, got, want)
		}
	})
}

func TestReaderBounds(t *testing.T) {
	tensor := `{"name":"t","shape":[1],"datatype":"FP32","data":[1]}`
	many := func(n int) string {
		return `{"inputs":[` + strings.TrimSuffix(strings.Repeat(tensor+",", n), ",") + `]}`
	}
	rank := func(n int) string {
		return `{"inputs":[{"name":"t","shape":[` + strings.TrimSuffix(strings.Repeat("1,", n), ",") + `],"datatype":"FP32","data":[1]}]}`
	}
	params := func(n int) string {
		var p []string
		for i := range n {
			p = append(p, fmt.Sprintf(`"p%d":%d`, i, i))
		}
		return `{"inputs":[{"name":"t","shape":[1],"datatype":"FP32","data":[1],"parameters":{` + strings.Join(p, ",") + `}}]}`
	}
	r := Reader{MaxTensors: 3, MaxRank: 4}
	for _, tc := range []struct {
		doc  string
		want string // the bound's error, "" when within the bounds
	}{
		{many(3), ""},
		{many(4), "inputs has more than 3 tensors"},
		{rank(4), ""},
		{rank(5), "inputs[0] (t): a shape of more than 4 dimensions"},
		{params(MaxParameters), ""},
		{params(MaxParameters + 1), fmt.Sprintf("inputs[0] (t): more than %d parameters", MaxParameters)},
	} {
		tensors, _, err := r.Request([]byte(tc.doc), 0)
		if tc.want == "" {
			if err != nil || len(tensors) == 0 {
				t.Errorf("%.60s: %v", tc.doc, err)
			}
			continue
		}
		var le *LimitError
		if !errors.As(err, &le) || err.Error() != tc.want {
			t.Errorf("%.60s: error %v, want the bound's %q", tc.doc, err, tc.want)
		}
	}
	// The defaults.
	if _, _, err := (Reader{}).Request([]byte(many(DefaultMaxTensors+1)), 0); err == nil {
		t.Errorf("%d tensors read with the default bounds", DefaultMaxTensors+1)
	}
	if _, _, err := (Reader{}).Request([]byte(rank(DefaultMaxRank+1)), 0); err == nil {
		t.Errorf("a shape of %d dimensions read with the default bounds", DefaultMaxRank+1)
	}
}

// TestReaderChargesWhatItHolds checks that what reading holds is charged as it is read: a
// budget too small refuses the body, and what was charged is given back; the charge covers
// what the heap grows by.
func TestReaderChargesWhatItHolds(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"outputs":[`)
	for i := range 500 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"t%d","shape":[1,2,3,4,5,6,7,8],"datatype":"FP32","parameters":{"a":1,"b":"x"},"data":[0]}`, i)
	}
	b.WriteString(`]}`)
	doc := []byte(b.String())

	bg := newBudget(1 << 30)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tensors, held, err := Reader{Budget: bg}.Response(doc, 0)
	runtime.ReadMemStats(&after)
	if err != nil || len(tensors) != 500 {
		t.Fatalf("%d tensors, %v", len(tensors), err)
	}
	// A tensor's parameters are a map: this body grows about seven times when read. What the
	// process allocates beside (the race detector's maps grow a little more) is within a tenth.
	if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > held+held/10 || held > 2*grown {
		t.Errorf("reading allocated %d bytes, it charged %d", grown, held)
	}
	runtime.KeepAlive(tensors)

	small := newBudget(held / 2)
	if _, h, err := (Reader{Budget: small}).Response(doc, 0); !errors.Is(err, ErrBudgetExceeded) || h != 0 {
		t.Fatalf("with half the budget: held %d, error %v", h, err)
	}
	if small.used.Load() != 0 || small.peak.Load() > held/2 {
		t.Fatalf("the budget counts %d after the refusal, %d at most", small.used.Load(), small.peak.Load())
	}
}

func TestParseInt(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "-0": 0, "7": 7, "-12": -12,
		"9223372036854775807": 1<<63 - 1, "-9223372036854775808": -1 << 63,
	} {
		if got, ok := parseInt([]byte(in)); !ok || got != want {
			t.Errorf("parseInt(%s) = %d, %v", in, got, ok)
		}
	}
	for _, in := range []string{"9223372036854775808", "-9223372036854775809", "1.5", "1e3", "99999999999999999999"} {
		if got, ok := parseInt([]byte(in)); ok {
			t.Errorf("parseInt(%s) = %d, want refused", in, got)
		}
	}
}
