// Package router is the data path of a Pipeline: an HTTP server that carries one request
// through the steps, each once what it waits for has arrived (the previous step's response, or
// the answers its inputs name: graph.go), ends early when a step's stopWhen expression (CEL)
// holds, retries transient failures with a per-step deadline, passes trace headers on, and
// exports per-step metrics.
//
// It imports nothing from the controllers: the operator builds a config.Config
// (internal/router/config: the JSON document documented in docs/router.md) and runs the router
// binary (cmd/router) with it.
//
// The engine is this package: the graph of the steps, retries, stopWhen, tensor mapping,
// errors and metrics. It holds bodies with internal/router/bodies (buffers within a budget)
// and calls the steps with internal/router/stepclient (the HTTP/1.1 client and its
// connections), neither of which knows of the engine.
package router
