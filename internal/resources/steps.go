package resources

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// Names inside a step's pod.
const (
	containerName   = "step"
	portName        = "http"
	ModelVolumeName = "models"
)

// StepURL is the in-cluster URL of the Service of step i in a cluster whose DNS domain is
// domain: http://<service>.<namespace>.svc.<domain>.:<port>, an absolute name (see
// ClusterDomain.ServiceHost).
func StepURL(p *pipelinev1.Pipeline, i int, domain ClusterDomain) string {
	return fmt.Sprintf("http://%s:%d", domain.ServiceHost(StepObjectName(p, i), p.Namespace), StepPort(p, i))
}

// nextStepURL is the URL step i forwards to: the next step's Service; empty for the last step,
// and for every step when the router calls them.
func nextStepURL(p *pipelinev1.Pipeline, i int, domain ClusterDomain) string {
	// With the router, the router calls every step: a step that also forwarded by itself would
	// have the later steps run twice. Every step then sees what the last one sees, no next step.
	if i+1 >= len(p.Spec.Steps) || RouterEnabled(p) {
		return ""
	}
	return StepURL(p, i+1, domain)
}

// stepEnv is the environment of step i in a cluster whose DNS domain is domain: the env entries
// that were v1beta1 args (Pipeline.LeadingEnv), in their order, then the variables the operator
// injects, then the step's other env entries, in their order. A Pipeline made in v1beta1 keeps
// the order v1beta1 gave its step's container (args sorted by name, the injected variables,
// env), and with it its pods.
func stepEnv(p *pipelinev1.Pipeline, i int, domain ClusterDomain) []*corev1ac.EnvVarApplyConfiguration {
	s := p.Spec.Steps[i]
	leading := p.LeadingEnv(i)
	env := make([]*corev1ac.EnvVarApplyConfiguration, 0, len(pipelinev1.InjectedEnv)+len(s.Env))
	for _, e := range s.Env {
		if slices.Contains(leading, e.Name) {
			env = append(env, leadingEnvVar(e))
		}
	}
	env = append(env,
		corev1ac.EnvVar().WithName(pipelinev1.EnvModelName).WithValue(s.Model),
		corev1ac.EnvVar().WithName(pipelinev1.EnvModelPath).WithValue(modelPath(p, i)),
		corev1ac.EnvVar().WithName(pipelinev1.EnvPipelineName).WithValue(p.Name),
		corev1ac.EnvVar().WithName(pipelinev1.EnvStepName).WithValue(StepName(p, i)),
		corev1ac.EnvVar().WithName(pipelinev1.EnvStepIndex).WithValue(strconv.Itoa(i+1)),
		corev1ac.EnvVar().WithName(pipelinev1.EnvNextStepURL).WithValue(nextStepURL(p, i, domain)),
	)
	for _, e := range s.Env {
		if !slices.Contains(leading, e.Name) {
			env = append(env, Convert[corev1ac.EnvVarApplyConfiguration](e))
		}
	}
	return env
}

// leadingEnvVar is env entry e of LeadingEnv. One with a value is written as v1beta1 wrote its
// arg, with the value even when it is empty.
func leadingEnvVar(e corev1.EnvVar) *corev1ac.EnvVarApplyConfiguration {
	if e.ValueFrom != nil {
		return Convert[corev1ac.EnvVarApplyConfiguration](e)
	}
	return corev1ac.EnvVar().WithName(e.Name).WithValue(e.Value)
}

// StepDeployment is the Deployment of step i: its pods are pinned to the node named node (the
// node the step's location, or the fallback it failed over to, resolves to; empty is the name
// location), mount the model claim read-only and receive the step's configuration as
// environment variables (NEXT_STEP_URL names the next step's Service in the cluster's DNS domain,
// domain). level is the Pod Security level the Pipeline's namespace enforces; the pods are
// admitted there.
func StepDeployment(p *pipelinev1.Pipeline, i int, level PodSecurityLevel, node string, domain ClusterDomain) *appsv1ac.DeploymentApplyConfiguration {
	s := p.Spec.Steps[i]
	labels := StepLabels(p, i)
	port := StepPort(p, i)

	container := corev1ac.Container().
		WithName(containerName).
		WithImage(s.Image).
		WithPorts(corev1ac.ContainerPort().
			WithName(portName).
			WithContainerPort(port).
			WithProtocol(corev1.ProtocolTCP)).
		WithEnv(stepEnv(p, i, domain)...).
		WithVolumeMounts(corev1ac.VolumeMount().
			WithName(ModelVolumeName).
			WithMountPath(mountPath(p)).
			WithReadOnly(true)).
		WithSecurityContext(StepSecurityContext(s, level))
	if s.Resources != nil {
		container.WithResources(Convert[corev1ac.ResourceRequirementsApplyConfiguration](*s.Resources))
	}

	pod := corev1ac.PodSpec().
		WithSecurityContext(StepPodSecurityContext()).
		// Nothing in the pod calls the Kubernetes API: no ServiceAccount token to steal.
		WithAutomountServiceAccountToken(false).
		// No variables naming every Service of the namespace (see podEnablesServiceLinks).
		WithEnableServiceLinks(podEnablesServiceLinks).
		WithContainers(container).
		WithVolumes(corev1ac.Volume().
			WithName(ModelVolumeName).
			WithPersistentVolumeClaim(corev1ac.PersistentVolumeClaimVolumeSource().
				WithClaimName(ClaimName(p)).
				WithReadOnly(true)))
	if len(s.NodeSelector) > 0 {
		pod.WithNodeSelector(maps.Clone(s.NodeSelector))
	}
	if node = cmp.Or(node, s.Location); node != "" {
		pod.WithAffinity(pinnedTo(node))
	}
	for _, t := range s.Tolerations {
		pod.WithTolerations(Convert[corev1ac.TolerationApplyConfiguration](t))
	}

	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(StepSelector(p, i))).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(labels).
			WithSpec(pod))
	// The HorizontalPodAutoscaler of an autoscaled step owns its replicas (see handOverReplicas).
	if Autoscaling(p, i) == nil {
		spec.WithReplicas(StepReplicas(p, i))
	}
	return appsv1ac.Deployment(StepObjectName(p, i), p.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(spec)
}

// StepService is the Service in front of step i's pods: ClusterIP, or for the entry
// step the type spec.expose asks for. Node ports are left to the apiserver, which allocates
// them for NodePort and LoadBalancer and drops them when the type returns to ClusterIP.
func StepService(p *pipelinev1.Pipeline, i int) *corev1ac.ServiceApplyConfiguration {
	port := StepPort(p, i)
	return corev1ac.Service(StepObjectName(p, i), p.Namespace).
		WithLabels(StepLabels(p, i)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(stepServiceType(p, i)).
			WithSelector(StepSelector(p, i)).
			WithPorts(corev1ac.ServicePort().
				WithName(portName).
				WithProtocol(corev1.ProtocolTCP).
				WithPort(port).
				WithTargetPort(intstr.FromInt32(port))))
}

// Convert turns an API value into the apply configuration of the same shape.
func Convert[T any](v any) *T {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err))
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		panic(fmt.Sprintf("unmarshal %T into %T: %v", v, out, err))
	}
	return out
}
