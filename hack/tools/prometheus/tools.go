//go:build tools

// Package tools pins Prometheus's server, which hack/build-tool.sh builds beside
// prometheus-config (this module's command).
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
