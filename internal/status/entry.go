package status

import (
	"cmp"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// setEntry reports how the entry step is reached from outside the cluster. External addresses
// come from load balancers and ingress controllers that may take minutes or never come (no
// controller in the cluster): the phase does not wait for them, the URL appears once known.
func setEntry(st *pipelinev1.PipelineStatus, p *pipelinev1.Pipeline, obs *Observed) {
	var svc *corev1.Service
	switch {
	case p.Spec.RouterEnabled():
		svc = obs.RouterService
	case len(obs.Services) > 0:
		svc = obs.Services[0]
	}
	if svc != nil && (svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer) &&
		len(svc.Spec.Ports) > 0 {
		st.NodePort = svc.Spec.Ports[0].NodePort
	}
	if resources.IngressSpec(p) != nil {
		st.IngressState = ingressState(obs.Ingress)
	}
	st.URL = entryURL(p, svc, obs.Ingress)
}

// ingressState is Ready once an ingress controller published an address for the Ingress.
func ingressState(ing *networkingv1.Ingress) pipelinev1.IngressState {
	if ing != nil && ingressAddress(ing) != "" {
		return pipelinev1.IngressStateReady
	}
	return pipelinev1.IngressStatePending
}

// entryURL is where the entry step is reached from outside the cluster, empty until known:
// through the Ingress, http(s)://<host or its load balancer address><path>; else through a
// LoadBalancer Service, http://<its address>:<port>.
func entryURL(p *pipelinev1.Pipeline, svc *corev1.Service, ing *networkingv1.Ingress) string {
	if spec := resources.IngressSpec(p); spec != nil {
		if ing == nil {
			return ""
		}
		host := spec.Host
		if host == "" {
			host = urlHost(ingressAddress(ing))
		}
		if host == "" {
			return ""
		}
		scheme := "http"
		if spec.TLSSecretName != "" {
			scheme = "https"
		}
		return scheme + "://" + host + resources.IngressPath(p)
	}
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.Ports) == 0 {
		return ""
	}
	for _, lb := range svc.Status.LoadBalancer.Ingress {
		if addr := cmp.Or(lb.IP, lb.Hostname); addr != "" {
			return "http://" + net.JoinHostPort(addr, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
		}
	}
	return ""
}

// ingressAddress is the first address an ingress controller published for ing.
func ingressAddress(ing *networkingv1.Ingress) string {
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		if addr := cmp.Or(lb.IP, lb.Hostname); addr != "" {
			return addr
		}
	}
	return ""
}

// urlHost writes an address as the host of a URL: IPv6 addresses go in brackets.
func urlHost(addr string) string {
	if strings.Contains(addr, ":") {
		return "[" + addr + "]"
	}
	return addr
}
