package celjson

import "bytes"

// Decoding a JSON document for stopWhen takes memory the body's buffer does not count: every
// value becomes an interface, every object a map. DecodeCost estimates it from the
// document's shape, so that the decoded document is held against the buffer budget too.
const (
	// jsonBytesFactor counts the document's bytes this many times (the document copied once
	// as the text of its strings, a string with escapes copied once more).
	jsonBytesFactor = 2
	// jsonValueBytes is counted for each value, key and container.
	jsonValueBytes = 64
)

// DecodeCost estimates the bytes that decoding doc into Go values allocates: twice its
// size plus jsonValueBytes for every value (each comma, colon and opening bracket outside
// strings starts one).
func DecodeCost(doc []byte) int64 {
	values := int64(1)
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '"':
			i = stringEnd(doc, i+1)
		case ',', ':', '{', '[':
			values++
		}
	}
	return jsonBytesFactor*int64(len(doc)) + jsonValueBytes*values
}

// stringEnd is the index of the quote that ends the string whose contents start at i (one not
// escaped: after an even number of backslashes), len(doc) when there is none.
func stringEnd(doc []byte, i int) int {
	for {
		q := bytes.IndexByte(doc[i:], '"')
		if q < 0 {
			return len(doc)
		}
		q += i
		b := q
		for b > i && doc[b-1] == '\\' {
			b--
		}
		if (q-b)%2 == 0 {
			return q
		}
		i = q + 1
	}
}
