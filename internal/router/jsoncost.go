package router

// Decoding a JSON document for stopWhen takes memory the body's buffer does not count: every
// value becomes an interface, every object a map. jsonDecodeCost estimates it from the
// document's shape, so that the decoded document is held against the buffer budget too.
const (
	// jsonBytesFactor counts the document's bytes this many times (the document copied once
	// as the text of its strings, a string with escapes copied once more).
	jsonBytesFactor = 2
	// jsonValueBytes is counted for each value, key and container.
	jsonValueBytes = 64
)

// jsonDecodeCost estimates the bytes that decoding doc into Go values allocates: twice its
// size plus jsonValueBytes for every value (each comma, colon and opening bracket outside
// strings starts one).
func jsonDecodeCost(doc []byte) int64 {
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
