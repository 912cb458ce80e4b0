package status

import (
	"strings"
	"unicode/utf8"

	"github.com/ndsl-cn/pipeline-operator/internal/termtext"
)

// plainText is s, text a pod's containers or its kubelet wrote (a termination message, why a
// container waits or is not ready), without the characters a terminal acts on rather than shows,
// since the status it is copied into is read on terminals (kubectl describe, kubectl pipeline
// status): tab, line feed, carriage return and the other whitespace controls, and the line and
// paragraph separators, become a space; the other C0 controls (ESC among them), DEL, the C1
// controls (U+0080–U+009F) and the bidirectional embeddings, overrides and isolates
// (U+202A–U+202E, U+2066–U+2069) are dropped; each run of bytes that is not UTF-8 becomes U+FFFD.
// The rest of the text is kept as it is: an escape sequence loses its ESC (and BEL) and is left
// as the harmless text after it.
func plainText(s string) string {
	if isPlainText(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToValidUTF8(s, string(utf8.RuneError)) {
		switch {
		case r == '\t', r == '\n', r == '\v', r == '\f', r == '\r', r == 0x2028, r == 0x2029:
			b.WriteByte(' ')
		case termtext.Control(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isPlainText says whether s is valid UTF-8 without a character plainText replaces or drops.
func isPlainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if termtext.Control(r) {
			return false
		}
	}
	return true
}
