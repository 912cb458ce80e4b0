package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readmeCommandPrefix starts every line of README.md that patches a Pipeline with kubectl.
const readmeCommandPrefix = "kubectl patch pipelines.v1.distri-infer.ndsl.cn "

// readmeResource is the resource those commands name, as kubectl takes it (resource.version.group).
const readmeResource = "pipelines.v1.distri-infer.ndsl.cn"

// What a documented command does, told from its patch.
const (
	commandPause    = "pause"
	commandResume   = "resume"
	commandFailback = "failback"
)

// documentedCommand is a `kubectl patch` line of README.md, split into words as a POSIX shell
// splits it.
type documentedCommand struct {
	line string
	// args are the words after "kubectl".
	args []string
}

// readmePath is README.md of the repository, from this package's directory (go test runs
// there).
var readmePath = filepath.Join("..", "..", "README.md")

// readmeCommands reads the kubectl patch commands of Pipelines from the README at path: every
// line that starts (after indentation) with readmeCommandPrefix, split as a shell would, by what
// its patch does. It fails on fewer than three such lines, on a line whose patch is none of
// pause, resume and failback, on two different lines that do the same, and when one of the
// three is missing.
func readmeCommands(path string) (map[string]documentedCommand, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if line := strings.TrimLeft(sc.Text(), " \t"); strings.HasPrefix(line, readmeCommandPrefix) {
			lines = append(lines, strings.TrimRight(line, " \t"))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(lines) < 3 {
		return nil, fmt.Errorf("%s has %d lines starting with %q, want at least 3 (pause, resume, failback): %q",
			path, len(lines), readmeCommandPrefix, lines)
	}
	out := map[string]documentedCommand{}
	for _, line := range lines {
		words, err := shellWords(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		c := documentedCommand{line: line, args: words[1:]}
		kind, err := c.kind()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if was, ok := out[kind]; ok && !slices.Equal(was.args, c.args) {
			return nil, fmt.Errorf("%s gives two different %s commands: %q and %q", path, kind, was.line, line)
		}
		out[kind] = c
	}
	for _, kind := range []string{commandPause, commandResume, commandFailback} {
		if _, ok := out[kind]; !ok {
			return nil, fmt.Errorf("%s has no %s command among %q", path, kind, lines)
		}
	}
	return out, nil
}

// patch is the value of the command's -p (--patch) flag.
func (c documentedCommand) patch() (string, error) {
	for i, a := range c.args {
		switch {
		case (a == "-p" || a == "--patch") && i+1 < len(c.args):
			return c.args[i+1], nil
		case strings.HasPrefix(a, "-p="), strings.HasPrefix(a, "--patch="):
			return a[strings.Index(a, "=")+1:], nil
		}
	}
	return "", fmt.Errorf("%q gives no patch (-p)", c.line)
}

// kind tells what the command does from its JSON patch: pause (spec.paused true), resume
// (spec.paused null) or failback (spec.failover.failbackNow true).
func (c documentedCommand) kind() (string, error) {
	text, err := c.patch()
	if err != nil {
		return "", err
	}
	var patch struct {
		Spec map[string]json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal([]byte(text), &patch); err != nil {
		return "", fmt.Errorf("the patch of %q is not JSON: %w", c.line, err)
	}
	paused, hasPaused := patch.Spec["paused"]
	var failover struct {
		FailbackNow *bool `json:"failbackNow"`
	}
	if f, ok := patch.Spec["failover"]; ok {
		if err := json.Unmarshal(f, &failover); err != nil {
			return "", fmt.Errorf("the patch of %q: spec.failover: %w", c.line, err)
		}
	}
	switch {
	case hasPaused && string(paused) == "true":
		return commandPause, nil
	case hasPaused && string(paused) == "null":
		return commandResume, nil
	case failover.FailbackNow != nil && *failover.FailbackNow:
		return commandFailback, nil
	}
	return "", fmt.Errorf("%q neither pauses (spec.paused true), resumes (spec.paused null) nor fails back (spec.failover.failbackNow true)", c.line)
}

// against is the command's kubectl arguments aimed at the Pipeline name in namespace ns: the
// name the README gives, right after the resource, replaced by name, and any namespace flag
// replaced by -n ns.
func (c documentedCommand) against(ns, name string) ([]string, error) {
	args := slices.Clone(c.args)
	at := slices.IndexFunc(args, func(a string) bool { return a == readmeResource || strings.HasPrefix(a, readmeResource+"/") })
	switch {
	case at < 0:
		return nil, fmt.Errorf("%q names no %s", c.line, readmeResource)
	case strings.HasPrefix(args[at], readmeResource+"/"):
		args[at] = readmeResource + "/" + name
	case at+1 >= len(args) || strings.HasPrefix(args[at+1], "-"):
		return nil, fmt.Errorf("%q gives no Pipeline name right after %s", c.line, readmeResource)
	default:
		args[at+1] = name
	}
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-n" || a == "--namespace":
			i++ // and its value
			continue
		case strings.HasPrefix(a, "-n="), strings.HasPrefix(a, "--namespace="):
			continue
		}
		out = append(out, a)
	}
	return append(out, "-n", ns), nil
}

// shellWords splits line into words as a POSIX shell splits a simple command: blanks separate
// words; single quotes keep everything up to the next single quote; double quotes keep
// everything but a backslash before $, `, ", \ or a newline; a backslash outside quotes keeps
// the next character; # at the start of a word starts a comment. It refuses an unterminated
// quote, and every unquoted character the shell would do more with than split on (expansions,
// globs, braces, pipes, lists, redirections, subshells), so that running the words without a
// shell runs what the shell would.
func shellWords(line string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == ' ' || ch == '\t':
			end()
		case ch == '#' && !inWord:
			end()
			return words, nil
		case ch == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("%q: unterminated single quote", line)
			}
			word.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case ch == '"':
			closed := false
			for i++; i < len(line); i++ {
				c := line[i]
				if c == '"' {
					closed = true
					break
				}
				if c == '$' || c == '`' {
					return nil, fmt.Errorf("%q: %q inside double quotes, which the shell would expand", line, c)
				}
				if c == '\\' && i+1 < len(line) && strings.IndexByte("$`\"\\\n", line[i+1]) >= 0 {
					i++
					c = line[i]
				}
				word.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("%q: unterminated double quote", line)
			}
			inWord = true
		case ch == '\\':
			if i+1 >= len(line) {
				return nil, fmt.Errorf("%q: a backslash ends the line (a continuation line)", line)
			}
			i++
			word.WriteByte(line[i])
			inWord = true
		case strings.IndexByte("$`|&;<>()*?[]{}~!", ch) >= 0:
			return nil, fmt.Errorf("%q: unquoted %q, which the shell would not take as a plain character", line, ch)
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	end()
	return words, nil
}

// TestShellWords checks the splitter against what a POSIX shell makes of each line.
func TestShellWords(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`kubectl patch pipelines.v1.distri-infer.ndsl.cn p --type=merge -p '{"spec":{"paused":true}}'`,
			[]string{"kubectl", "patch", "pipelines.v1.distri-infer.ndsl.cn", "p", "--type=merge", "-p", `{"spec":{"paused":true}}`}},
		{`a  'b c'd "e \"f\" \$g \h" i\ j '' # a comment`, []string{"a", "b cd", `e "f" $g \h`, "i j", ""}},
		{"a\t'#'b c#d", []string{"a", "#b", "c#d"}},
	} {
		got, err := shellWords(tc.line)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("shellWords(%q) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
	for _, line := range []string{`a 'b`, `a "b`, `a b\`, `a {"b":1}`, `a $B`, `a "$B"`, `a | b`, `a; b`, `a > b`, `a *`} {
		if got, err := shellWords(line); err == nil {
			t.Errorf("shellWords(%q) = %q, want an error", line, got)
		}
	}
}

// TestReadmeCommands checks, without a cluster, that README.md documents pausing, resuming and
// failing back a Pipeline with commands the end-to-end test can run.
func TestReadmeCommands(t *testing.T) {
	commands, err := readmeCommands(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	for kind, c := range commands {
		args, err := c.against("ns", "name")
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if args[0] != "patch" || !slices.Contains(args, "name") || !slices.Equal(args[len(args)-2:], []string{"-n", "ns"}) {
			t.Errorf("%s: %q aimed at ns/name is %q", kind, c.line, args)
		}
		t.Logf("%s: %q", kind, c.line)
	}
}
