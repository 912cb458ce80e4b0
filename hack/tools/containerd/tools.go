//go:build tools

// Package tools pins containerd, its runc shim and ctr, the container runtime of the local
// cluster's real nodes (hack/localcluster -real-nodes).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
