package resources

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestDesiredIngress(t *testing.T) {
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
		Name: "facedetection-pipeline-step-1", Port: networkingv1.ServiceBackendPort{Number: 9080}}}
	tests := []struct {
		name  string
		spec  pipelinev1.IngressExpose
		edit  func(p *pipelinev1.Pipeline)
		class *string
		rules []networkingv1.IngressRule
		tls   []networkingv1.IngressTLS
	}{{
		name: "defaults: any host, every path",
		rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: backend}}}}}},
	}, {
		name: "host, exact path and class",
		spec: pipelinev1.IngressExpose{Host: "infer.example.com", Path: "/detect", PathType: pipelinev1.IngressPathTypeExact,
			ClassName: "nginx"},
		class: ptr.To("nginx"),
		rules: []networkingv1.IngressRule{{Host: "infer.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/detect", PathType: ptr.To(networkingv1.PathTypeExact), Backend: backend}}}}}},
	}, {
		name: "TLS for the host",
		spec: pipelinev1.IngressExpose{Host: "infer.example.com", TLSSecretName: "infer-tls"},
		rules: []networkingv1.IngressRule{{Host: "infer.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: backend}}}}}},
		tls: []networkingv1.IngressTLS{{Hosts: []string{"infer.example.com"}, SecretName: "infer-tls"}},
	}, {
		name: "follows the entry step's name and port",
		edit: func(p *pipelinev1.Pipeline) {
			p.Spec.Steps[0], p.Spec.Steps[1] = p.Spec.Steps[1], p.Spec.Steps[0]
			p.Spec.Steps[0].Name = "detect"
		},
		rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: "facedetection-pipeline-detect", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "vision")
			spec := tt.spec
			p.Spec.Expose = &pipelinev1.Expose{Ingress: &spec}
			if tt.edit != nil {
				tt.edit(p)
			}
			ing := testenv.Typed[networkingv1.Ingress](t, Ingress(p))

			if ing.Name != "facedetection-pipeline" || ing.Namespace != "vision" {
				t.Errorf("ingress is %s/%s", ing.Namespace, ing.Name)
			}
			if len(ing.OwnerReferences) != 1 || !ptr.Deref(ing.OwnerReferences[0].Controller, false) || ing.OwnerReferences[0].UID != p.UID {
				t.Errorf("owner references %+v do not make the Pipeline the controller", ing.OwnerReferences)
			}
			wantLabels := map[string]string{
				"pipeline": "facedetection-pipeline", "step": "1",
				"app.kubernetes.io/name": "pipeline-ingress", "app.kubernetes.io/instance": "facedetection-pipeline",
				"app.kubernetes.io/component": "ingress", "app.kubernetes.io/part-of": "facedetection-pipeline",
				"app.kubernetes.io/managed-by": "pipeline-operator",
			}
			if diff := cmp.Diff(wantLabels, ing.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.class, ing.Spec.IngressClassName); diff != "" {
				t.Errorf("class (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.rules, ing.Spec.Rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.tls, ing.Spec.TLS); diff != "" {
				t.Errorf("tls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEntryServiceType(t *testing.T) {
	tests := []struct {
		name   string
		expose *pipelinev1.Expose
		want   corev1.ServiceType
	}{
		{name: "no expose", want: corev1.ServiceTypeClusterIP},
		{name: "expose without a type", expose: &pipelinev1.Expose{}, want: corev1.ServiceTypeClusterIP},
		{name: "node port", expose: &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeNodePort}, want: corev1.ServiceTypeNodePort},
		{name: "load balancer", expose: &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeLoadBalancer},
			want: corev1.ServiceTypeLoadBalancer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "default")
			p.Spec.Expose = tt.expose
			entry := testenv.Typed[corev1.Service](t, StepService(p, 0))
			if entry.Spec.Type != tt.want {
				t.Errorf("entry service type %q, want %q", entry.Spec.Type, tt.want)
			}
			for _, port := range entry.Spec.Ports {
				if port.NodePort != 0 {
					t.Errorf("node port %d is set: the apiserver allocates it and drops it for ClusterIP", port.NodePort)
				}
			}
			if other := testenv.Typed[corev1.Service](t, StepService(p, 1)); other.Spec.Type != corev1.ServiceTypeClusterIP {
				t.Errorf("step 2 service type %q: only the entry step is exposed", other.Spec.Type)
			}
		})
	}
}
