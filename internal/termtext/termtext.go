// Package termtext says which characters of a text a terminal acts on rather than shows: what
// the operator drops from pods' text it copies into a status, and what the kubectl plugin
// escapes in what it prints.
package termtext

// Control says whether r is a character a terminal acts on, or that changes how the text around
// it is seen: a C0 control (tab and line feed among them), DEL, a C1 control (U+0080–U+009F,
// U+009B a CSI), a bidirectional embedding, override or isolate (U+202A–U+202E, U+2066–U+2069),
// or the line or paragraph separator (U+2028, U+2029).
func Control(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
		r == 0x2028 || r == 0x2029
}
