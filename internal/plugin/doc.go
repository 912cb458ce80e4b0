// Package plugin is the kubectl plugin `kubectl pipeline` (cmd/kubectl-pipeline): a tree of a
// Pipeline's status, pausing, resuming and manual failback, the logs of a step and what the
// router logged about one request (docs/plugin.md).
//
// It reads Pipelines as unstructured objects in the version the cluster serves (v1, or v1beta1
// alone on a cluster of an operator before 0.2.0) and maps the fields of each version onto one
// summary (Pipeline), so that it imports neither API package's types: it works against the
// servers of older and newer releases alike. The files, one concern each:
//
//	document.go  the summary and the versioned JSON document of `status -o json`
//	mapping.go   an unstructured Pipeline of v1 or v1beta1 to the summary
//	render.go    the tree of `status`, coloured or not
//	server.go    which versions the cluster serves (discovery), and the clients
//	actions.go   pause, resume and failback: the patch each version takes
//	moves.go     since when a step runs on a fallback node (the operator's events)
//	logs.go      the logs of a step's pods, and the router's lines about a request id
//	printable.go text the plugin did not write (status, log lines, errors), escaped for a terminal
//	command.go   the cobra commands and their flags
package plugin
