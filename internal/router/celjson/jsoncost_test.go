package celjson

import (
	"testing"
)

func TestJSONDecodeCostCountsValuesOutsideStrings(t *testing.T) {
	for _, tc := range []struct {
		doc    string
		values int64
	}{
		{`1`, 1},
		{`[1,2,3]`, 4},
		{`{"a":1,"b":[true,null]}`, 7},
		{`"a,b:{c[d"`, 1},
		{`["\",", ","]`, 3},
	} {
		if got, want := DecodeCost([]byte(tc.doc)), 2*int64(len(tc.doc))+jsonValueBytes*tc.values; got != want {
			t.Errorf("DecodeCost(%s) = %d, want %d (%d values)", tc.doc, got, want, tc.values)
		}
	}
}

// costByStates is DecodeCost as a state machine over every byte: the reference the
// faster scan is checked against.
func costByStates(doc []byte) int64 {
	values := int64(1)
	inString, escaped := false, false
	for _, c := range doc {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ',' || c == ':' || c == '{' || c == '[':
			values++
		}
	}
	return jsonBytesFactor*int64(len(doc)) + jsonValueBytes*values
}

// jsonCostCases are documents, JSON or not, where a scan of the strings can go wrong: quotes
// and backslashes in and out of them.
var jsonCostCases = []string{`1`, `[1,2,3]`, `{"a":1,"b":[true,null]}`, `"a,b:{c[d"`, `["\",", ","]`,
	`"\\",1`, `"\\\",1"`, `"\`, `"`, `",`, `{"a\\":{"b":"\\\\\"[,"}}`, `\\",[`}

// FuzzJSONDecodeCost checks DecodeCost against costByStates on any bytes, JSON or not.
func FuzzJSONDecodeCost(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, want := DecodeCost(doc), costByStates(doc); got != want {
			t.Errorf("DecodeCost(%q) = %d, want %d", doc, got, want)
		}
	})
}
