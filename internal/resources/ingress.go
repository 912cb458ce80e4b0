package resources

import (
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// Ingress is the Ingress of spec.expose.ingress: one rule (for host, or any host) that
// routes path to the entry's Service (the router's with dataPath.mode Router, else the first step's),
// with TLS for host when tlsSecretName is set. It must only be called when the spec asks for an
// Ingress.
func Ingress(p *pipelinev1.Pipeline) *networkingv1ac.IngressApplyConfiguration {
	spec := IngressSpec(p)
	service, port := StepObjectName(p, 0), StepPort(p, 0)
	if RouterEnabled(p) {
		service, port = RouterObjectName(p), RouterServicePort
	}
	backend := networkingv1ac.IngressBackend().
		WithService(networkingv1ac.IngressServiceBackend().
			WithName(service).
			WithPort(networkingv1ac.ServiceBackendPort().WithNumber(port)))
	rule := networkingv1ac.IngressRule().
		WithHTTP(networkingv1ac.HTTPIngressRuleValue().
			WithPaths(networkingv1ac.HTTPIngressPath().
				WithPath(IngressPath(p)).
				WithPathType(ingressPathType(p)).
				WithBackend(backend)))
	if spec.Host != "" {
		rule.WithHost(spec.Host)
	}

	ingress := networkingv1ac.IngressSpec().WithRules(rule)
	if spec.ClassName != "" {
		ingress.WithIngressClassName(spec.ClassName)
	}
	if spec.TLSSecretName != "" {
		ingress.WithTLS(networkingv1ac.IngressTLS().
			WithHosts(spec.Host).
			WithSecretName(spec.TLSSecretName))
	}

	return networkingv1ac.Ingress(IngressName(p), p.Namespace).
		WithLabels(ingressLabels(p)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(ingress)
}
