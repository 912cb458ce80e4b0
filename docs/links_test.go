// Package docs holds the project's documentation; its tests keep the links between the pages,
// and from README.md, pointing at files and headings that exist, and the imports between the
// packages flowing the way architecture.md says (architecture_test.go).
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

var (
	// link is a markdown link or image: its target, without a title.
	link = regexp.MustCompile(`!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// heading is an ATX heading.
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	inlineCode = regexp.MustCompile("`[^`]*`")
	linkText   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// slug is the anchor GitHub gives a heading: lower case, spaces to '-', punctuation dropped.
func slug(h string) string {
	h = linkText.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), "$1")
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// outsideFences calls f with each line of a markdown file that is not in a code block.
func outsideFences(t *testing.T, path string, f func(no int, line string)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fenced := false
	for no, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			f(no+1, line)
		}
	}
}

// anchors are the anchors of the headings of a markdown file.
func anchors(t *testing.T, path string) map[string]bool {
	out, seen := map[string]bool{}, map[string]int{}
	outsideFences(t, path, func(_ int, line string) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	})
	return out
}

func TestLinksPointAtFilesAndHeadingsThatExist(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("*/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(append(pages, more...), filepath.Join("..", "README.md"))
	cache := map[string]map[string]bool{}
	checked := 0
	for _, page := range pages {
		outsideFences(t, page, func(no int, line string) {
			for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s:%d: %s: no such file", page, no, target)
						continue
					}
				}
				checked++
				if anchor == "" || !strings.HasSuffix(path, ".md") {
					continue
				}
				if cache[path] == nil {
					cache[path] = anchors(t, path)
				}
				if !cache[path][anchor] {
					t.Errorf("%s:%d: %s: no heading with that anchor in %s", page, no, target, path)
				}
			}
		})
	}
	if checked == 0 {
		t.Fatal("no links found: the test reads nothing")
	}
}
