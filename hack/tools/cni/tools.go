//go:build tools

// Package tools pins the CNI plugins the local cluster's real nodes wire their pods with:
// a bridge per node, host-local addresses, loopback and port mapping.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
)
