package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
// and those under it), but those under except, import nothing under any of forbidden, through
// any other package, except what is under allowed.
type importRule struct {
	why       string
	from      []string
	except    []string
	forbidden []string
	allowed   []string
}

var importRules = []importRule{
	{
		why:       "the router is a separate binary: it imports nothing of the operator (the release stamp is shared)",
		from:      []string{"internal/router", "cmd/router"},
		forbidden: []string{""},
		allowed:   []string{"internal/router", "internal/version"},
	},
	{
		why:       "the operator knows of the router its configuration and stopWhen's checker, not its engine",
		from:      []string{""},
		except:    []string{"internal/router", "cmd/router", "hack/bench-router"},
		forbidden: []string{"internal/router"},
		// The protocol (its bodies, its generated gRPC code and the check of its gRPC messages)
		// is no part of the engine: the reference model server serves it.
		allowed: []string{"internal/router/config", "internal/router/stopwhen", "internal/router/oip", "internal/router/jsonscan"},
	},
	{
		why:       "the router's client to the steps and its bodies know nothing of its engine: the engine imports them",
		from:      []string{"internal/router/stepclient", "internal/router/bodies"},
		forbidden: []string{"internal/router"},
		// The configuration brings stopWhen's checker with it.
		allowed: []string{"internal/router/bodies", "internal/router/config", "internal/router/stopwhen", "internal/router/oip", "internal/router/jsonscan"},
	},
	{
		why:       "builders, apply, status and the shared vocabulary sit below the controllers and the manager's assembly",
		from:      []string{"internal/resources", "internal/apply", "internal/status", "internal/problem"},
		forbidden: []string{"internal/controller", "internal/manager"},
	},
	{
		why:       "nodes answers questions about nodes: it imports nothing of the module, not even the API",
		from:      []string{"internal/nodes"},
		forbidden: []string{""},
		allowed:   []string{"internal/nodes"},
	},
}

// spoke is the deprecated API version: types and their conversion to the hub, api/v1.
const spoke = "api/v1beta1"

// spokeImporters are the only packages that may import the spoke themselves: the generated client,
// the registration of the manager's scheme and of the conversion webhook, the kubectl plugin
// (which reads a server of an older release, serving only v1beta1, through the conversion), and
// the samples, which give the tests the v1beta1 seed users hold (and the test environment that
// registers it). Every other package works in api/v1.
var spokeImporters = []string{spoke, "pkg/client", "internal/manager", "internal/admission", "internal/plugin", "config/samples", "internal/testenv"}

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
			if !underAny(p.path, rule.from) || underAny(p.path, rule.except) {
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
			if under(i, spoke) && !underAny(p.path, spokeImporters) {
				out = append(out, fmt.Sprintf("%s imports %s: the operator works in api/v1; only %s import the deprecated version",
					p.path, i, strings.Join(spokeImporters[1:], ", ")))
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

// Imports flow one way, as architecture.md says: the router and nodes import nothing of the
// operator, the router's step client and bodies nothing of its engine, the builders, apply,
// status and problem nothing of the controllers or the manager's assembly, nothing imports a
// command, and only the generated client, the scheme and conversion registrations, the plugin
// and the samples import api/v1beta1.
func TestImportsFlowOneWay(t *testing.T) {
	pkgs := modulePackages(t)
	for _, want := range []string{"cmd", "cmd/router", "internal/router", "internal/router/stepclient", "internal/router/bodies",
		"internal/resources", "internal/apply", "internal/status", "internal/problem", "internal/controller/pipeline",
		"internal/manager", "internal/nodes", "internal/admission", "internal/metrics"} {
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
		{"the builders import the router's configuration", goPackage{path: "internal/resources", deps: []string{"internal/router/config", "internal/router/stopwhen"}}, 0},
		{"admission imports the router's engine", goPackage{path: "internal/admission", deps: []string{"internal/router/config", "internal/router"}}, 1},
		{"the manager imports the router's JSON reading", goPackage{path: "internal/manager", deps: []string{"internal/router/celjson"}}, 1},
		{"the router's configuration imports stopWhen", goPackage{path: "internal/router/config", deps: []string{"internal/router/stopwhen"}}, 0},
		{"the router imports its client and bodies", goPackage{path: "internal/router", deps: []string{"internal/router/stepclient", "internal/router/bodies"}}, 0},
		{"the step client imports the bodies, configuration and protocol", goPackage{path: "internal/router/stepclient",
			deps: []string{"internal/router/bodies", "internal/router/config", "internal/router/oip"}}, 0},
		{"the step client imports the engine", goPackage{path: "internal/router/stepclient", deps: []string{"internal/router"}}, 1},
		{"the bodies import the step client", goPackage{path: "internal/router/bodies", deps: []string{"internal/router/stepclient"}}, 1},
		{"the step client imports the builders", goPackage{path: "internal/router/stepclient", deps: []string{"internal/resources"}}, 1},
		{"admission imports the router's step client", goPackage{path: "internal/admission", deps: []string{"internal/router/stepclient"}}, 1},
		{"apply imports resources", goPackage{path: "internal/apply", deps: []string{"internal/resources", "internal/problem"}}, 0},
		{"status imports the reconciler", goPackage{path: "internal/status", deps: []string{"internal/controller/pipeline"}}, 1},
		{"resources imports the assembly", goPackage{path: "internal/resources", deps: []string{"internal/manager"}}, 1},
		{"problem imports a controller through another package", goPackage{path: "internal/problem", deps: []string{"internal/controller/operatorcondition"}}, 1},
		{"the reconciler imports status", goPackage{path: "internal/controller/pipeline", deps: []string{"internal/status"}}, 0},
		{"the assembly imports a command", goPackage{path: "internal/manager", imports: []string{"cmd"}}, 1},
		{"a command imports the router command", goPackage{path: "cmd", imports: []string{"cmd/router"}}, 1},
		{"a command imports the assembly", goPackage{path: "cmd", imports: []string{"internal/manager"}}, 0},
		{"nodes imports the API", goPackage{path: "internal/nodes", deps: []string{"api/v1"}}, 1},
		{"the reconciler imports the spoke", goPackage{path: "internal/controller/pipeline", imports: []string{"api/v1beta1"}}, 1},
		{"status imports the spoke", goPackage{path: "internal/status", imports: []string{"api/v1beta1"}}, 1},
		{"the reconciler imports the spoke through the samples", goPackage{path: "internal/controller/pipeline", deps: []string{"api/v1beta1"}}, 0},
		{"the manager registers the spoke", goPackage{path: "internal/manager", imports: []string{"api/v1", "api/v1beta1"}}, 0},
		{"the generated client imports the spoke", goPackage{path: "pkg/client/listers/api/v1beta1", imports: []string{"api/v1beta1"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := importViolations([]goPackage{tt.pkg}); len(got) != tt.want {
				t.Errorf("violations %q, want %d", got, tt.want)
			}
		})
	}
}

// The files of the operator that import api/v1beta1: the registration of the version in the
// manager, and what it is without it; the seed sample, deleted with the version. Retiring
// v1beta1 is deleting api/v1beta1, the seed and the registration's contents.
const (
	v1beta1Registration = "internal/manager/v1beta1.go"
	v1beta1Seed         = "config/samples/v1beta1.go"
	withoutV1beta1      = `package manager

import (
	"k8s.io/apimachinery/pkg/runtime"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelineadmission "github.com/ndsl-cn/pipeline-operator/internal/admission"
)

func addV1beta1(*runtime.Scheme) {}

var recordStorageIdentity func(*pipelinev1.Pipeline) bool

var spellings = map[string]pipelineadmission.Spelling{}
`
)

// The operator and the router build with api/v1beta1 deleted and its registration emptied: no
// other package of theirs knows the deprecated version. (The generated client and the kubectl
// plugin, which reads clusters of the release that served v1beta1 alone, keep it until then.)
func TestOperatorBuildsWithoutV1beta1(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the operator")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the operator: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	replace := map[string]string{}
	files, err := filepath.Glob(filepath.Join(root, spoke, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s (%v)", spoke, err)
	}
	for _, f := range append(files, filepath.Join(root, v1beta1Seed)) {
		replace[f] = "" // deleted
	}
	stub := filepath.Join(t.TempDir(), "v1beta1.go")
	if err := os.WriteFile(stub, []byte(withoutV1beta1), 0o644); err != nil {
		t.Fatal(err)
	}
	replace[filepath.Join(root, v1beta1Registration)] = stub
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(t.TempDir(), "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, "build", "-overlay", overlayFile, "-o", os.DevNull, "./cmd", "./cmd/router")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the operator does not build without %s: %v\n%s", spoke, err, out)
	}
	// The overlay does remove the version: the operator's dependencies no longer hold it.
	list := exec.Command(goTool, "list", "-overlay", overlayFile, "-deps", "./cmd")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if strings.Contains(string(out), "/"+spoke+"\n") {
		t.Fatalf("the operator still depends on %s under the overlay", spoke)
	}
}
