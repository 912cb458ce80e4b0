package plugin

import (
	"bytes"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/ndsl-cn/pipeline-operator/internal/version"
)

// `version` and `--version` print the release the plugin was built as, without a cluster.
func TestVersion(t *testing.T) {
	defer func(v string) { version.Version = v }(version.Version)
	version.Version = "1.2.3"
	for _, args := range [][]string{{"version"}, {"--version"}} {
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
