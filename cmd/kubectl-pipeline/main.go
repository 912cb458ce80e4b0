// Command kubectl-pipeline is the kubectl plugin of pipeline-operator: on PATH, kubectl runs it
// as `kubectl pipeline` (docs/plugin.md).
//
//	kubectl pipeline status [NAME] [-A] [-o json] [--no-color]
//	kubectl pipeline pause|resume|failback NAME
//	kubectl pipeline logs NAME STEP [-f] [--tail N]
//	kubectl pipeline trace NAME REQUEST_ID
//	kubectl pipeline version
//	kubectl pipeline completion bash|zsh|fish|powershell
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ndsl-cn/pipeline-operator/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	cmd := plugin.NewCommand(plugin.ProcessEnv())
	// kubectl completes `kubectl pipeline ...` by running kubectl_complete-pipeline with the
	// words typed: this binary under that name (a link) answers as cobra's completion.
	if strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") == "kubectl_complete-pipeline" {
		cmd.SetArgs(append([]string{cobra.ShellCompRequestCmd}, os.Args[1:]...))
	}
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		plugin.WriteError(os.Stderr, err)
		os.Exit(1)
	}
}
