package celjson

import "github.com/ndsl-cn/pipeline-operator/internal/router/jsonscan"

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
			i = jsonscan.StringEnd(doc, i+1)
		case ',', ':', '{', '[':
			values++
		}
	}
	return jsonBytesFactor*int64(len(doc)) + jsonValueBytes*values
}
