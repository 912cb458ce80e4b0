package plugin

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/ndsl-cn/pipeline-operator/internal/termtext"
)

// Text the plugin did not write itself (a Pipeline's status, the messages its containers left,
// log lines, events, errors of the apiserver) may hold characters a terminal acts on rather than
// shows: escape sequences that set the clipboard (OSC 52), the window title or the cursor, a
// carriage return that writes over the start of a line, C1 controls in UTF-8 (U+009B is a CSI),
// bidirectional overrides that reorder what is seen. Every human-readable output writes such text
// through Printable (PrintableLines for text of several lines), which shows those characters
// escaped instead; the JSON of `status -o json` is escaped by printableJSON.

// Printable is s with every character a terminal would act on written as an escape, so that it
// prints on one line as text: C0 controls other than tab (`\x1b`, `\r`, `\n`, ...), DEL, C1
// controls (`\u009b`), the bidirectional embeddings, overrides and isolates (U+202A–U+202E,
// U+2066–U+2069) and the line and paragraph separators (`\u2028`), and each byte that is not
// UTF-8 (`\xff`). Any other text is returned as it is.
func Printable(s string) string { return escapeControls(s, false) }

// PrintableLines is Printable, but keeps line feeds: for text of several lines (an error
// joined from several).
func PrintableLines(s string) string { return escapeControls(s, true) }

// WriteError writes err as the plugin's last line, "error: <err>", escaped as PrintableLines.
func WriteError(w io.Writer, err error) {
	_, _ = fmt.Fprintln(w, "error:", PrintableLines(err.Error()))
}

// escapeControls is s with its controls escaped (see Printable), keeping "\n" when lines is true.
func escapeControls(s string, lines bool) string {
	if printable(s, lines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && lines, r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			if name, ok := controlNames[r]; ok {
				b.WriteString(name)
			} else {
				fmt.Fprintf(&b, `\x%02x`, r)
			}
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// controlNames are the C0 controls escaped by name, as Go writes them.
var controlNames = map[rune]string{'\a': `\a`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\v': `\v`}

// printable says whether s has nothing to escape (see Printable), "\n" allowed when lines is
// true.
func printable(s string, lines bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\t' && (c != '\n' || !lines)) || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r) {
			return false
		}
		i += size
	}
	return true
}

// unsafeRune says whether r is a rune past ASCII that a terminal acts on or that changes how the
// text around it is seen (termtext.Control): a C1 control, a bidirectional embedding, override
// or isolate, a line or paragraph separator.
func unsafeRune(r rune) bool {
	return r >= utf8.RuneSelf && termtext.Control(r)
}

// printableJSON is the JSON data, as encoding/json wrote it, with the characters it leaves in
// strings that a terminal acts on (DEL, C1 controls, bidirectional controls: see Printable)
// written as \u escapes, which decode to the same strings. encoding/json itself escapes the C0
// controls and U+2028 and U+2029, and writes U+FFFD for bytes that are not UTF-8.
func printableJSON(data []byte) []byte {
	if printable(string(data), true) {
		return data
	}
	var b strings.Builder
	b.Grow(len(data) + 16)
	s := string(data)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r == 0x7f || unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return []byte(b.String())
}

// printablePipeline is p with every string of it escaped as Printable, for the tree. It copies
// what it changes: p's slices are left as they are.
func printablePipeline(p Pipeline) Pipeline {
	e := Printable
	p.Namespace, p.Name, p.ServedVersion, p.Phase, p.PausedBy, p.URL = e(p.Namespace), e(p.Name), e(p.ServedVersion), e(p.Phase), e(p.PausedBy), e(p.URL)
	p.OperatorVersion = e(p.OperatorVersion)
	p.Failover.Failback = e(p.Failover.Failback)
	if p.Conditions != nil {
		conditions := make([]Condition, len(p.Conditions))
		for i, c := range p.Conditions {
			c.Type, c.Status, c.Reason, c.Message = e(c.Type), e(c.Status), e(c.Reason), e(c.Message)
			conditions[i] = c
		}
		p.Conditions = conditions
	}
	if p.Steps != nil {
		steps := make([]Step, len(p.Steps))
		for i, s := range p.Steps {
			s.Name, s.Deployment, s.State, s.Reason, s.Message = e(s.Name), e(s.Deployment), e(s.State), e(s.Reason), e(s.Message)
			s.DeploymentState, s.ServiceState, s.URL = e(s.DeploymentState), e(s.ServiceState), e(s.URL)
			s.Placement = printablePlacement(s.Placement)
			steps[i] = s
		}
		p.Steps = steps
	}
	if p.Router != nil {
		r := *p.Router
		r.State = e(r.State)
		r.Placement = printablePlacement(r.Placement)
		p.Router = &r
	}
	return p
}

// printablePlacement is pl with its strings escaped as Printable.
func printablePlacement(pl Placement) Placement {
	pl.Location, pl.Node = Printable(pl.Location), Printable(pl.Node)
	if pl.FallbackLocations != nil {
		fallbacks := make([]string, len(pl.FallbackLocations))
		for i, l := range pl.FallbackLocations {
			fallbacks[i] = Printable(l)
		}
		pl.FallbackLocations = fallbacks
	}
	return pl
}
