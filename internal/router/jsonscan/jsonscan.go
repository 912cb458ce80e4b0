// Package jsonscan finds the ends of values in a JSON document without decoding them: what the
// router's readers of Open Inference Protocol bodies (oip) and of answers for stopWhen (celjson)
// use to step over what they do not need.
package jsonscan

import "bytes"

// SkipValue is the end of the valid JSON value that starts at b[i]: a string is skipped to its
// closing quote, a container to its closing bracket, a number or literal to the next delimiter.
func SkipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return StringEnd(b, i+1) + 1
	case '{', '[':
		for depth := 0; ; i++ {
			switch b[i] {
			case '"':
				i = StringEnd(b, i+1)
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !delimiter[b[i]] {
		i++
	}
	return i
}

// delimiter tells the bytes that end a number or a literal in valid JSON.
var delimiter = func() (t [256]bool) {
	for _, c := range " \t\n\r,]}" {
		t[c] = true
	}
	return t
}()

// StringEnd is the index of the quote that ends the string whose contents start at i (one after
// an even number of backslashes), or len(b) when none does.
func StringEnd(b []byte, i int) int {
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		q += i
		e := q
		for e > i && b[e-1] == '\\' {
			e--
		}
		if (q-e)%2 == 0 {
			return q
		}
		i = q + 1
	}
}

// SkipSpace is the index of the first byte from i on that is not JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
