// Package version is the release of the product's binaries (the manager, the router, the
// kubectl plugin), stamped at build time:
//
//	go build -ldflags "-X github.com/ndsl-cn/pipeline-operator/internal/version.Version=0.2.0"
//
// The Makefile and the Dockerfile stamp $(VERSION); a binary built otherwise says "devel".
package version

import (
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is the release the binary was built as.
var Version = "devel"

// String is what --version prints: the program, its release, and the Go release and platform
// it was built with.
func String(program string) string {
	return fmt.Sprintf("%s %s (%s, %s/%s)", program, Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// BuildInfo is the gauge <prefix>_build_info, always 1, whose labels say what runs: version and
// goversion. Joined to other series on the pod, it tells which release reported them.
func BuildInfo(prefix string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        prefix + "_build_info",
		Help:        "Always 1: the release (version) and Go release (goversion) the binary was built with.",
		ConstLabels: prometheus.Labels{"version": Version, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}
