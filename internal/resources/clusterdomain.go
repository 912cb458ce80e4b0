package resources

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultClusterDomain is the DNS domain of a cluster's Services unless its kubelets are given
// another (kubelet --cluster-domain).
const DefaultClusterDomain ClusterDomain = "cluster.local"

// ClusterDomain is the DNS domain of the cluster's Services, without a trailing dot: the
// operator names a step's Service <service>.<namespace>.svc.<domain>. in the URLs it hands out.
// Empty is DefaultClusterDomain.
type ClusterDomain string

// ParseClusterDomain reads a cluster domain as the manager's command line gives it: a DNS
// subdomain, with or without the trailing dot.
func ParseClusterDomain(s string) (ClusterDomain, error) {
	d := strings.TrimSuffix(s, ".")
	if d == "" {
		return "", errors.New("the cluster domain must not be empty")
	}
	if errs := validation.IsDNS1123Subdomain(d); len(errs) > 0 {
		return "", fmt.Errorf("cluster domain %q: %s", s, strings.Join(errs, "; "))
	}
	return ClusterDomain(d), nil
}

// ServiceHost is the absolute DNS name of the Service name in namespace ns:
// name.ns.svc.<domain>. with the root's trailing dot.
//
// Pods resolve names with the search path of their resolv.conf (<namespace>.svc.<domain>,
// svc.<domain>, <domain> and the node's own search domains) tried first for every name of fewer
// than ndots (5) dots, so name.ns.svc would reach a Service of a namespace named svc, and
// name.ns.svc.cluster.local (4 dots) is still tried in every search domain first, the node's
// included, whose DNS servers are outside the cluster. Only the trailing dot makes the name
// absolute: the resolver asks for it alone, whatever the search path.
func (d ClusterDomain) ServiceHost(name, ns string) string {
	if d == "" {
		d = DefaultClusterDomain
	}
	return name + "." + ns + ".svc." + string(d) + "."
}
