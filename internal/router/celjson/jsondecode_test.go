package celjson

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

// jsonDecodeCases are documents on every path of Decode: each is decoded as
// encoding/json decodes it, or refused as it refuses it.
var jsonDecodeCases = []string{
	// Values.
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `123456789012345`, `1234567890123456`,
	`-123456789012345678901234567890`, `9007199254740993`, `0.1`, `-0.5e-3`, `1E+2`, `1e400`,
	`-1e400`, `1e-400`, `2.2250738585072011e-308`, `""`, `"a"`, `[]`, `{}`, `[1,"a",true,null]`,
	`{"a":{"b":[{}]}}`, " \t\r\n[ 1 , 2 ] \n", `{"a":1,"a":2}`, `{"a":[1],"b":{"c":null},"a":"x"}`,
	// Strings: escapes, surrogates, invalid UTF-8.
	`"\"\\\/\b\f\n\r\t"`, `"\u0041\u00e9\u4e2d"`, `"\u0000"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`,
	`"\ud83d"`, `"\ud83dx"`, `"\ude00"`, `"\ud83d\ud83d\ude00"`, `"\ud83d\u0041"`, `"\ud83d\n"`,
	"\"caf\xc3\xa9\"", "\"\xff\"", "\"a\xc3\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"",
	"\"\\n\xff\xfe\"", "{\"k\xff\":1}", "\"\xf4\x90\x80\x80\"", `"é\u00e9"`,
	// Refused.
	``, ` `, `nul`, `nulll`, `True`, `tru`, `-`, `01`, `1.`, `.1`, `1e`, `1e+`, `+1`, `0x1`, `1.5.`,
	`NaN`, `Infinity`, `"abc`, `"\`, `"\x"`, `"\'"`, `"\u12"`, `"\u12G4"`, "\"a\tb\"", "\"a\x00\"",
	`[`, `[1`, `[1,]`, `[,1]`, `[1 2]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{a:1}`, `{"a" 1}`,
	`{,}`, `{"a":1 "b":2}`, `[1]]`, `{}}`, `1 2`, "\xef\xbb\xbf{}", "\v1", `[1]x`, `"a"b`,
}

func TestParseJSONDecodesAsEncodingJSON(t *testing.T) {
	for _, doc := range jsonDecodeCases {
		checkLikeEncodingJSON(t, []byte(doc))
	}
}

func TestParseJSONNestingDepth(t *testing.T) {
	for _, depth := range []int{maxJSONDepth, maxJSONDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := map[string]string{"[": "]", `{"a":`: "}"}[open]
			doc := strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth)
			_, err := Decode([]byte(doc))
			if (err == nil) != (depth <= maxJSONDepth) {
				t.Errorf("%d nested %q: error %v", depth, open, err)
			}
			checkLikeEncodingJSON(t, []byte(doc))
		}
	}
}

func TestParseJSONNumbers(t *testing.T) {
	for doc, want := range map[string]float64{
		`0`:                      0,
		`123456789012345`:        123456789012345,
		`-123456789012345`:       -123456789012345,
		`9007199254740993`:       9007199254740992, // rounded to even, as strconv does
		`0.1`:                    0.1,
		`1e-400`:                 0,
		`1.7976931348623157e308`: math.MaxFloat64,
	} {
		if got, err := Decode([]byte(doc)); err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", doc, got, err, want)
		}
	}
	if v, _ := Decode([]byte(`-0`)); !math.Signbit(v.(float64)) {
		t.Error("-0 lost its sign")
	}
}

// TestParseJSONEmptyContainersAreNotNil checks that [] and {} are empty, not nil, as
// encoding/json makes them (CEL tells a null from an empty list).
func TestParseJSONEmptyContainersAreNotNil(t *testing.T) {
	v, err := Decode([]byte(`{"a":[],"b":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if a, ok := m["a"].([]any); !ok || a == nil {
		t.Errorf("[] decoded as %#v", m["a"])
	}
	if o, ok := m["b"].(map[string]any); !ok || o == nil {
		t.Errorf("{} decoded as %#v", m["b"])
	}
}

// FuzzDecodeJSON checks Decode against encoding/json: the same value, or both refuse.
func FuzzDecodeJSON(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkLikeEncodingJSON(t, doc)
	})
}

func checkLikeEncodingJSON(t *testing.T, doc []byte) {
	t.Helper()
	var want any
	wantErr := json.Unmarshal(doc, &want)
	got, err := Decode(doc)
	switch {
	case (err != nil) != (wantErr != nil):
		t.Errorf("%q: error %v, encoding/json's %v", doc, err, wantErr)
	case err == nil && !sameJSON(got, want):
		t.Errorf("%q: %#v, encoding/json's %#v", doc, got, want)
	}
	if valid := Valid(doc); valid != (wantErr == nil) {
		t.Errorf("%q: Valid %v, encoding/json's error %v", doc, valid, wantErr)
	}
}

// sameJSON reports whether a and b, values as encoding/json gives an `any`, are the same: of
// the same types, equal, zeros of the same sign, empty arrays and objects not nil.
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for k, v := range a {
			if w, found := b[k]; !found || !sameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case float64:
		b, ok := b.(float64)
		return ok && math.Float64bits(a) == math.Float64bits(b)
	}
	return a == b
}

// TestPlain8 checks the eight-byte test against plainJSON, byte by byte: every byte value in
// every position, among plain bytes.
func TestPlain8(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			if got := plain8(binary.LittleEndian.Uint64(b)); got != plainJSON[c] {
				t.Errorf("byte %#x at %d: plain8 %v, plainJSON %v", c, pos, got, plainJSON[c])
			}
		}
	}
}

// addSeeds gives a fuzz target the documents of every test as seeds (besides its corpus in
// testdata/fuzz): those of Decode, Value and DecodeCost, and the items document.
func addSeeds(f *testing.F) {
	for _, docs := range [][]string{jsonDecodeCases, jsonValueDocuments, jsonCostCases} {
		for _, doc := range docs {
			f.Add([]byte(doc))
		}
	}
	f.Add(itemsDocument(f))
}

// itemsDocument is testdata/items.json, the document make bench-router sends: 1083 bytes,
// {"items": [16 strings of 64 bytes]}.
func itemsDocument(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile("testdata/items.json")
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
