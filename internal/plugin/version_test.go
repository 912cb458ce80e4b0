package plugin

import (
	"bytes"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/ndsl-cn/pipeline-operator/internal/version"
)

// `version --client` and `--version` print the release the plugin was built as, without a
// cluster.
func TestVersion(t *testing.T) {
	defer func(v string) { version.Version = v }(version.Version)
	version.Version = "1.2.3"
	for _, args := range [][]string{{"version", "--client"}, {"--version"}} {
		var out bytes.Buffer
		cmd := NewCommand(Env{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &out},
			Getenv: func(string) string { return "" }, Now: time.Now})
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if got := out.String(); got != "kubectl-pipeline 1.2.3\n" {
			t.Errorf("%v printed %q", args, got)
		}
	}
}

// The operator's releases are told from the status of the Pipelines read: one line per release
// with its count, a line when there are several, and what a status without one means.
func TestOperatorVersions(t *testing.T) {
	for _, c := range []struct {
		name      string
		pipelines []Pipeline
		ns, want  string
	}{
		{name: "none", ns: "vision", want: "operator: unknown (no Pipeline of namespace vision to tell)\n"},
		{name: "one release", ns: "vision", pipelines: []Pipeline{{OperatorVersion: "0.3.0"}, {OperatorVersion: "0.3.0"}},
			want: "operator 0.3.0: wrote the status of 2 Pipelines of namespace vision\n"},
		{name: "an upgrade under way, every namespace", pipelines: []Pipeline{{OperatorVersion: "0.3.0"}, {}, {OperatorVersion: "0.2.0\x1b[2J"}},
			want: "an operator of a release that does not say it (or none yet): wrote the status of 1 Pipeline of any namespace\n" +
				"operator 0.2.0\\x1b[2J: wrote the status of 1 Pipeline of any namespace\n" +
				"operator 0.3.0: wrote the status of 1 Pipeline of any namespace\n" +
				"more than one release: the operator has not reconciled every Pipeline since it was upgraded\n"},
	} {
		if got := operatorVersions(c.pipelines, c.ns); got != c.want {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}
