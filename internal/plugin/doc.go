// Package plugin is the kubectl plugin `kubectl pipeline` (cmd/kubectl-pipeline): a tree of a
// Pipeline's status, pausing, resuming and manual failback, the logs of a step and what the
// router logged about one request (docs/plugin.md).
//
// It reads Pipelines in the version the cluster serves (v1, or v1beta1 alone on a cluster of an
// operator before 0.2.0) through that version's generated client (pkg/client) into the API's
// types, converts a v1beta1 one to v1 with the API's own conversion, and maps them onto one
// summary (Pipeline). Fields a newer release added are dropped, not refused: it reads the
// servers of older and newer releases alike. The files, one concern each:
//
//	document.go  the summary and the versioned JSON document of `status -o json`
//	mapping.go   a Pipeline read in v1 (the API's types) to the summary
//	v1beta1.go   a cluster that serves v1beta1 alone: its client, and its Pipelines converted
//	             to v1 (the plugin's only file that knows the deprecated version)
//	render.go    the tree of `status`, coloured or not
//	server.go    which versions the cluster serves (discovery), and the clients: Pipelines read,
//	             listed, watched and patched through the generated client of that version
//	actions.go   pause, resume and failback: the patch each version takes
//	moves.go     since when a step runs on a fallback node (the operator's events)
//	logs.go      the logs of a step's pods, and the router's lines about a request id
//	printable.go text the plugin did not write (status, log lines, errors), escaped for a terminal
//	command.go   the cobra commands and their flags
package plugin
