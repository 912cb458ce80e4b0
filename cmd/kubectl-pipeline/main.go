// Command kubectl-pipeline is the kubectl plugin of pipeline-operator: on PATH, kubectl runs it
// as `kubectl pipeline` (docs/plugin.md).
//
//	kubectl pipeline status [NAME] [-A] [-o json] [--no-color]
//	kubectl pipeline pause|resume|failback NAME
//	kubectl pipeline logs NAME STEP [-f] [--tail N]
//	kubectl pipeline trace NAME REQUEST_ID
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ndsl-cn/pipeline-operator/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := plugin.NewCommand(plugin.ProcessEnv()).ExecuteContext(ctx)
	stop()
	if err != nil {
		plugin.WriteError(os.Stderr, err)
		os.Exit(1)
	}
}
