// Command coredns is CoreDNS with only the plugins the local cluster's DNS needs: it answers
// the cluster's Service and pod names from the apiserver and refuses everything else (the
// cluster has no way out, so there is nothing to forward to).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The order in which a query passes the plugins, as in CoreDNS's own plugin.cfg.
func init() {
	dnsserver.Directives = []string{"bind", "errors", "log", "health", "ready", "kubernetes"}
}

func main() { coremain.Run() }
