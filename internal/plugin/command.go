package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/ndsl-cn/pipeline-operator/internal/version"
)

// Env is what the commands take from the process: their streams, the environment, whether
// standard output is a terminal, and the clock.
type Env struct {
	genericiooptions.IOStreams
	// Getenv reads an environment variable (os.Getenv).
	Getenv func(string) string
	// IsTerminal says whether w is a terminal.
	IsTerminal func(w io.Writer) bool
	// Now is the time (time.Now).
	Now func() time.Time
}

// ProcessEnv is the Env of this process.
func ProcessEnv() Env {
	return Env{
		IOStreams:  genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
		Getenv:     os.Getenv,
		IsTerminal: isTerminal,
		Now:        time.Now,
	}
}

// isTerminal says whether w is a character device, as a terminal is.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// UseColor says whether the tree is coloured: standard output is a terminal, NO_COLOR is unset
// or empty (no-color.org) and --no-color is not given.
func UseColor(env Env, noColor bool) bool {
	return !noColor && env.Getenv("NO_COLOR") == "" && env.IsTerminal(env.Out)
}

// NewCommand is `kubectl pipeline` and its subcommands, with kubectl's connection flags
// (--kubeconfig, --context, -n/--namespace, ...).
func NewCommand(env Env) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:   "kubectl-pipeline",
		Short: "Inspect and operate pipeline-operator Pipelines",
		Long: `Inspect and operate the Pipelines of pipeline-operator (distri-infer.ndsl.cn):
a tree of their status, pausing, resuming and manual failback, the logs of a step and what
the router logged about one request. Works with clusters serving v1 and with those of
operators that serve only v1beta1 (0.1.0).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// kubectl runs the plugin as `kubectl pipeline`: usage and help say so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl pipeline"},
		// --version, as `version` says it.
		Version: version.Version,
	}
	root.SetVersionTemplate("kubectl-pipeline {{.Version}}\n")
	root.SetIn(env.In)
	root.SetOut(env.Out)
	root.SetErr(env.ErrOut)
	flags.AddFlags(root.PersistentFlags())
	root.AddCommand(statusCommand(env, flags),
		actionCommand(env, flags, ActionPause, "Pause a Pipeline: the operator leaves its children as they are"),
		actionCommand(env, flags, ActionResume, "Resume a paused Pipeline"),
		actionCommand(env, flags, ActionFailback, "Ask a Pipeline with failback Manual to return its steps from their fallback nodes"),
		logsCommand(env, flags),
		traceCommand(env, flags),
		versionCommand(env, flags))
	return root
}

// versionCommand prints the plugin's release (the one `make release` stamped it with) and,
// unless --client, the releases of the operator that wrote the status of the namespace's
// Pipelines (of every namespace with -A).
func versionCommand(env Env, flags *genericclioptions.ConfigFlags) *cobra.Command {
	var clientOnly, all bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, and the operator's that reconciled the namespace's Pipelines",
		Example: `  kubectl pipeline version
  kubectl pipeline version -A
  kubectl pipeline version --client`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := fmt.Fprintf(env.Out, "kubectl-pipeline %s\n", version.Version); err != nil || clientOnly {
				return err
			}
			s, ns, err := connect(flags)
			if err != nil {
				return err
			}
			where := ns
			if all {
				where = ""
			}
			pipelines, err := s.List(cmd.Context(), where)
			if err != nil {
				return err
			}
			_, err = io.WriteString(env.Out, operatorVersions(pipelines, where))
			return err
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Print the plugin's version only, without asking the cluster")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "Read the Pipelines of every namespace")
	return cmd
}

// operatorVersions says which releases of the operator wrote the status of pipelines, read in
// namespace ns (every namespace when empty): one line per release, with its count of Pipelines.
func operatorVersions(pipelines []Pipeline, ns string) string {
	where := "of namespace " + Printable(ns)
	if ns == "" {
		where = "of any namespace"
	}
	if len(pipelines) == 0 {
		return fmt.Sprintf("operator: unknown (no Pipeline %s to tell)\n", where)
	}
	counts := map[string]int{}
	for _, p := range pipelines {
		counts[p.OperatorVersion]++
	}
	var b strings.Builder
	for _, v := range slices.Sorted(maps.Keys(counts)) {
		what := "operator " + Printable(v)
		if v == "" {
			what = "an operator of a release that does not say it (or none yet)"
		}
		plural := "s"
		if counts[v] == 1 {
			plural = ""
		}
		fmt.Fprintf(&b, "%s: wrote the status of %d Pipeline%s %s\n", what, counts[v], plural, where)
	}
	if len(counts) > 1 {
		b.WriteString("more than one release: the operator has not reconciled every Pipeline since it was upgraded\n")
	}
	return b.String()
}

// connect is the cluster of flags and the namespace the flags (or the kubeconfig's context) name.
func connect(flags *genericclioptions.ConfigFlags) (*Server, string, error) {
	ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", err
	}
	s, err := Connect(flags)
	if err != nil {
		return nil, "", err
	}
	return s, ns, nil
}

func statusCommand(env Env, flags *genericclioptions.ConfigFlags) *cobra.Command {
	var output string
	var all, noColor, watch bool
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show a Pipeline (or every Pipeline of the namespace) as a tree: phase, conditions, steps, failover, router",
		Example: `  kubectl pipeline status facedetection-pipeline
  kubectl pipeline status facedetection-pipeline --watch
  kubectl pipeline status -A -o json`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeNames(flags),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("--output %q: only json is supported (without it: the tree)", output)
			}
			if all && len(args) == 1 {
				return errors.New("a NAME and --all-namespaces do not go together")
			}
			s, ns, err := connect(flags)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			show := func() error {
				items, err := s.read(ctx, ns, all, args)
				if err != nil {
					return err
				}
				if output == "json" {
					return WriteDocument(env.Out, items)
				}
				if len(items) == 0 {
					where := "namespace " + ns
					if all {
						where = "any namespace"
					}
					_, err := fmt.Fprintf(env.Out, "no Pipelines in %s\n", Printable(where))
					return err
				}
				return Render(env.Out, items, RenderOptions{Color: UseColor(env, noColor), Now: env.Now()})
			}
			if !watch {
				return show()
			}
			where, name := ns, ""
			if all {
				where = ""
			}
			if len(args) == 1 {
				name = args[0]
			}
			// On a terminal, each drawing replaces the last; elsewhere (and for JSON) they follow
			// one another.
			redraw := output != "json" && env.IsTerminal(env.Out)
			return s.watch(ctx, where, name, func(first bool) error {
				if redraw {
					if _, err := io.WriteString(env.Out, clearScreen); err != nil {
						return err
					}
				} else if !first && output != "json" {
					if _, err := io.WriteString(env.Out, "\n"); err != nil {
						return err
					}
				}
				return show()
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json (a versioned document, docs/plugin.md), or the tree when empty")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "After showing, show again whenever a Pipeline shown changes, until interrupted (Ctrl-C)")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "Show the Pipelines of every namespace")
	cmd.Flags().BoolVar(&noColor, "no-color", false, "Do not colour the tree (it is coloured only on a terminal, and NO_COLOR turns it off too)")
	return cmd
}

// read is the Pipeline args[0] of ns, or every Pipeline of ns (of every namespace with all),
// summarised, with since when a step is on a fallback node.
func (s *Server) read(ctx context.Context, ns string, all bool, args []string) ([]Pipeline, error) {
	var items []Pipeline
	add := func(p Pipeline) {
		s.AddFallbackSince(ctx, &p)
		items = append(items, p)
	}
	if len(args) == 1 {
		p, err := s.Pipeline(ctx, ns, args[0])
		if err != nil {
			return nil, err
		}
		add(p)
		return items, nil
	}
	if all {
		ns = ""
	}
	list, err := s.List(ctx, ns)
	if err != nil {
		return nil, err
	}
	for _, p := range list {
		add(p)
	}
	return items, nil
}

func actionCommand(env Env, flags *genericclioptions.ConfigFlags, action Action, short string) *cobra.Command {
	return &cobra.Command{
		Use:               string(action) + " NAME",
		Short:             short,
		Example:           fmt.Sprintf("  kubectl pipeline %s facedetection-pipeline -n team-a", action),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeNames(flags),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ns, err := connect(flags)
			if err != nil {
				return err
			}
			return s.Do(cmd.Context(), env.Out, action, ns, args[0])
		},
	}
}

func logsCommand(env Env, flags *genericclioptions.ConfigFlags) *cobra.Command {
	o := LogOptions{Tail: -1}
	cmd := &cobra.Command{
		Use:   "logs NAME STEP",
		Short: "Print the logs of a step's pods (STEP: its name or 1-based position), each line prefixed with its pod when there are several",
		Example: `  kubectl pipeline logs facedetection-pipeline step-1 --tail 20
  kubectl pipeline logs facedetection-pipeline 2 -f`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeNames(flags),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ns, err := connect(flags)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			p, err := s.Pipeline(ctx, ns, args[0])
			if err != nil {
				return err
			}
			step, err := FindStep(p, args[1])
			if err != nil {
				return err
			}
			pods, err := s.StepPods(ctx, p, step)
			if err != nil {
				return err
			}
			if len(pods) == 0 {
				return fmt.Errorf("step %s of pipeline %s/%s has no pods", step.Name, ns, p.Name)
			}
			return s.StepLogs(ctx, env.Out, env.ErrOut, pods, o)
		},
	}
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", false, "Stream the logs")
	cmd.Flags().Int64Var(&o.Tail, "tail", -1, "Lines of the end of each pod's log to show; -1: all")
	return cmd
}

func traceCommand(env Env, flags *genericclioptions.ConfigFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "trace NAME REQUEST_ID",
		Short: "Print what the router's pods logged about one request id, oldest first",
		Long: `Print the lines of the logs of the Pipeline's router pods that name the request id
(requestID=<id>), oldest first, each with its pod. The router logs failed requests only (one
line each, docs/router.md): a request that succeeded leaves no line.`,
		Example:           "  kubectl pipeline trace facedetection-pipeline req-42",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeNames(flags),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ns, err := connect(flags)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			p, err := s.Pipeline(ctx, ns, args[0])
			if err != nil {
				return err
			}
			if p.Router == nil {
				return fmt.Errorf("pipeline %s/%s runs no router (spec.dataPath.mode is not Router): it has no router logs", ns, p.Name)
			}
			pods, err := s.RouterPods(ctx, p)
			if err != nil {
				return err
			}
			if len(pods) == 0 {
				return fmt.Errorf("pipeline %s/%s has no router pods", ns, p.Name)
			}
			lines, err := s.Trace(ctx, env.ErrOut, pods, args[1])
			if err != nil {
				return err
			}
			if len(lines) == 0 {
				return WriteNothingFound(env.Out, pods, args[1])
			}
			return WriteTrace(env.Out, lines)
		},
	}
}

// WriteNothingFound says that no line of the router pods' logs names the request id, and why
// that may be.
func WriteNothingFound(w io.Writer, pods []corev1.Pod, requestID string) error {
	_, err := fmt.Fprintf(w, "nothing found: no line of the logs of the router pods (%s) names requestID=%s.\n"+
		"The router logs only failed requests, one line each: a request that succeeded leaves no line.\n"+
		"The logs of pods that were replaced, and lines the kubelet has rotated away, are not read.\n", podNames(pods), Printable(requestID))
	return err
}

func podNames(pods []corev1.Pod) string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// clearScreen moves a terminal's cursor home and clears its screen, before each drawing of
// `status --watch`.
const clearScreen = "\x1b[H\x1b[2J"

// completeNames completes a command's first argument with the names of the Pipelines of the
// namespace the flags name, for shell completion (`kubectl pipeline completion`, and kubectl's own
// through kubectl_complete-pipeline: docs/plugin.md).
func completeNames(flags *genericclioptions.ConfigFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, ns, err := connect(flags)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		items, err := s.List(cmd.Context(), ns)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []cobra.Completion
		for _, p := range items {
			if strings.HasPrefix(p.Name, toComplete) {
				names = append(names, p.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
