package status

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestComputeStatusEntry(t *testing.T) {
	nodePortService := func(typ corev1.ServiceType, lb ...corev1.LoadBalancerIngress) *corev1.Service {
		return &corev1.Service{
			Spec: corev1.ServiceSpec{Type: typ, ClusterIP: "10.0.0.10",
				Ports: []corev1.ServicePort{{Port: 9080, NodePort: 31234}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: lb}},
		}
	}
	ingress := func(lb ...networkingv1.IngressLoadBalancerIngress) *networkingv1.Ingress {
		return &networkingv1.Ingress{Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: lb}}}
	}
	tests := []struct {
		name         string
		expose       *pipelinev1.Expose
		service      *corev1.Service
		ingress      *networkingv1.Ingress
		url          string
		nodePort     int32
		ingressState pipelinev1.IngressState
	}{{
		name: "not exposed",
	}, {
		name:     "node port",
		expose:   &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeNodePort},
		service:  nodePortService(corev1.ServiceTypeNodePort),
		nodePort: 31234,
	}, {
		name:     "load balancer without an address yet",
		expose:   &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeLoadBalancer},
		service:  nodePortService(corev1.ServiceTypeLoadBalancer),
		nodePort: 31234,
	}, {
		name:     "load balancer IP",
		expose:   &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeLoadBalancer},
		service:  nodePortService(corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "203.0.113.7"}),
		url:      "http://203.0.113.7:9080",
		nodePort: 31234,
	}, {
		name:     "load balancer IPv6",
		expose:   &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeLoadBalancer},
		service:  nodePortService(corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "2001:db8::7"}),
		url:      "http://[2001:db8::7]:9080",
		nodePort: 31234,
	}, {
		name:     "load balancer host name",
		expose:   &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeLoadBalancer},
		service:  nodePortService(corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{Hostname: "lb.example.net"}),
		url:      "http://lb.example.net:9080",
		nodePort: 31234,
	}, {
		name:    "switched back to ClusterIP: the apiserver dropped the node port",
		expose:  &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeClusterIP},
		service: nodePortService(corev1.ServiceTypeClusterIP),
	}, {
		name:         "ingress not created",
		expose:       &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "infer.example.com"}},
		ingressState: pipelinev1.IngressStatePending,
	}, {
		name:         "ingress host before the controller publishes an address",
		expose:       &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "infer.example.com", Path: "/detect"}},
		ingress:      ingress(),
		url:          "http://infer.example.com/detect",
		ingressState: pipelinev1.IngressStatePending,
	}, {
		name: "ingress host with TLS",
		expose: &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{Host: "infer.example.com",
			TLSSecretName: "infer-tls"}},
		ingress:      ingress(networkingv1.IngressLoadBalancerIngress{IP: "198.51.100.4"}),
		url:          "https://infer.example.com/",
		ingressState: pipelinev1.IngressStateReady,
	}, {
		name:         "ingress without host and without address",
		expose:       &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{}},
		ingress:      ingress(),
		ingressState: pipelinev1.IngressStatePending,
	}, {
		name:         "ingress without host: its load balancer address",
		expose:       &pipelinev1.Expose{Ingress: &pipelinev1.IngressExpose{}},
		ingress:      ingress(networkingv1.IngressLoadBalancerIngress{Hostname: "ingress.example.net"}),
		url:          "http://ingress.example.net/",
		ingressState: pipelinev1.IngressStateReady,
	}, {
		name: "ingress wins over a load balancer Service",
		expose: &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeLoadBalancer,
			Ingress: &pipelinev1.IngressExpose{Path: "/v1"}},
		service:      nodePortService(corev1.ServiceTypeLoadBalancer, corev1.LoadBalancerIngress{IP: "203.0.113.7"}),
		ingress:      ingress(networkingv1.IngressLoadBalancerIngress{IP: "198.51.100.4"}),
		url:          "http://198.51.100.4/v1",
		nodePort:     31234,
		ingressState: pipelinev1.IngressStateReady,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testenv.Sample(t, "default")
			p.Spec.Expose = tt.expose
			o := convergedWorld()
			if tt.service != nil {
				o.Services[0] = tt.service
			}
			o.Ingress = tt.ingress
			st := Compute(p, o)
			if st.URL != tt.url {
				t.Errorf("url %q, want %q", st.URL, tt.url)
			}
			if st.NodePort != tt.nodePort {
				t.Errorf("nodePort %d, want %d", st.NodePort, tt.nodePort)
			}
			if st.IngressState != tt.ingressState {
				t.Errorf("ingressState %q, want %q", st.IngressState, tt.ingressState)
			}
			if st.Phase != pipelinev1.PipelinePhaseRunning {
				t.Errorf("phase %q: external addresses must not hold back Running", st.Phase)
			}
		})
	}
}
