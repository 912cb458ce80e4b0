package docs

import (
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// goPackage is one package of the module as `go list` reports it: its import path relative to
// the module ("cmd", "internal/router"), what it imports of the module directly and through
// others, in the same form.
type goPackage struct {
	path    string
	imports []string
	deps    []string
}

// importRule is a direction architecture.md promises imports keep: the packages from (a path
// and those under it) import nothing under any of forbidden, through any other package, except
// what is under allowed.
type importRule struct {
	why       string
	from      []string
	forbidden []string
	allowed   []string
}

var importRules = []importRule{
	{
		why:       "the router is a separate binary: it imports nothing of the operator",
		from:      []string{"internal/router", "cmd/router"},
		forbidden: []string{""},
		allowed:   []string{"internal/router"},
	},
	{
		why:       "builders, apply, status and the shared vocabulary sit below the controllers and the manager's assembly",
		from:      []string{"internal/resources", "internal/apply", "internal/status", "internal/problem"},
		forbidden: []string{"internal/controller", "internal/operator"},
	},
}

// under reports whether path is dir or a package under it; "" is every package.
func under(path, dir string) bool {
	return dir == "" || path == dir || strings.HasPrefix(path, dir+"/")
}

func underAny(path string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return under(path, d) })
}

// importViolations are the imports of pkgs that break importRules, or import a command (cmd/...:
// commands are the top, nothing imports them).
func importViolations(pkgs []goPackage) []string {
	var out []string
	for _, p := range pkgs {
		for _, rule := range importRules {
			if !underAny(p.path, rule.from) {
				continue
			}
			for _, d := range p.deps {
				if underAny(d, rule.forbidden) && !underAny(d, rule.allowed) {
					out = append(out, fmt.Sprintf("%s imports %s: %s", p.path, d, rule.why))
				}
			}
		}
		for _, i := range p.imports {
			if under(i, "cmd") {
				out = append(out, fmt.Sprintf("%s imports %s: nothing imports a command", p.path, i))
			}
		}
	}
	return out
}

// modulePackages lists the module's packages with one `go list` run from the module's root.
func modulePackages(t *testing.T) []goPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the imports: %v", err)
	}
	const sep = "\x1f"
	cmd := exec.Command(goTool, "list", "-f",
		"{{.Module.Path}}"+sep+"{{.ImportPath}}"+sep+"{{join .Imports \" \"}}"+sep+"{{join .Deps \" \"}}", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []goPackage
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, sep)
		if len(f) != 4 {
			t.Fatalf("go list printed %q", line)
		}
		module := f[0]
		// own is the paths of the module's packages among list, relative to the module.
		own := func(list string) []string {
			var paths []string
			for p := range strings.FieldsSeq(list) {
				if rel, ok := strings.CutPrefix(p, module+"/"); ok {
					paths = append(paths, rel)
				}
			}
			return paths
		}
		rel, ok := strings.CutPrefix(f[1], module+"/")
		if !ok {
			rel = ""
		}
		pkgs = append(pkgs, goPackage{path: rel, imports: own(f[2]), deps: own(f[3])})
	}
	return pkgs
}

// Imports flow one way, as architecture.md says: the router imports nothing of the operator,
// the builders, apply, status and problem nothing of the controllers or the assembly, and
// nothing imports a command.
func TestImportsFlowOneWay(t *testing.T) {
	pkgs := modulePackages(t)
	for _, want := range []string{"cmd", "cmd/router", "internal/router", "internal/resources", "internal/apply",
		"internal/status", "internal/problem", "internal/controller/pipeline", "internal/operator"} {
		if !slices.ContainsFunc(pkgs, func(p goPackage) bool { return p.path == want }) {
			t.Fatalf("go list does not list %s: the rules below would check nothing", want)
		}
	}
	for _, v := range importViolations(pkgs) {
		t.Error(v)
	}
}

// Each rule catches what it forbids, directly or through another package, and lets the rest
// through.
func TestImportViolations(t *testing.T) {
	tests := []struct {
		name string
		pkg  goPackage
		want int
	}{
		{"the router imports itself", goPackage{path: "internal/router", deps: []string{"internal/router/wire"}}, 0},
		{"the router imports the API", goPackage{path: "internal/router", deps: []string{"api/v1beta1"}}, 1},
		{"the router command imports the builders", goPackage{path: "cmd/router", deps: []string{"internal/router", "internal/resources"}}, 1},
		{"a package under the router imports problem", goPackage{path: "internal/router/wire", deps: []string{"internal/problem"}}, 1},
		{"apply imports resources", goPackage{path: "internal/apply", deps: []string{"internal/resources", "internal/problem"}}, 0},
		{"status imports the reconciler", goPackage{path: "internal/status", deps: []string{"internal/controller/pipeline"}}, 1},
		{"resources imports the assembly", goPackage{path: "internal/resources", deps: []string{"internal/operator"}}, 1},
		{"problem imports a controller through another package", goPackage{path: "internal/problem", deps: []string{"internal/controller/operatorcondition"}}, 1},
		{"the reconciler imports status", goPackage{path: "internal/controller/pipeline", deps: []string{"internal/status"}}, 0},
		{"the assembly imports a command", goPackage{path: "internal/operator", imports: []string{"cmd"}}, 1},
		{"a command imports the router command", goPackage{path: "cmd", imports: []string{"cmd/router"}}, 1},
		{"a command imports the assembly", goPackage{path: "cmd", imports: []string{"internal/operator"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := importViolations([]goPackage{tt.pkg}); len(got) != tt.want {
				t.Errorf("violations %q, want %d", got, tt.want)
			}
		})
	}
}
