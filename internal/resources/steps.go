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
	// SharedMemoryVolumeName is the memory-backed emptyDir of a step with sharedMemorySize,
	// mounted at SharedMemoryPath.
	SharedMemoryVolumeName = "shared-memory"
	// SharedMemoryPath is where a step with sharedMemorySize gets its shared memory.
	SharedMemoryPath = "/dev/shm"
)

// AppProtocolH2C is the appProtocol of a Service port that speaks HTTP/2 without TLS (the
// gRPC services of the router and of OpenInferenceProtocolGRPC steps).
const AppProtocolH2C = "kubernetes.io/h2c"

// StepPortName is the name of the port of a step's container (and of its Service): a probe of
// the step names its port so.
const StepPortName = portName

// StepURL is the in-cluster URL of the Service of step i in a cluster whose DNS domain is
// domain: http://<service>.<namespace>.svc.<domain>.:<port>, an absolute name (see
// ClusterDomain.ServiceHost).
func StepURL(p *pipelinev1.Pipeline, i int, domain ClusterDomain) string {
	return stepServiceURL("http", p, i, domain)
}

// stepGRPCURL is the address at which the router calls the gRPC service of step i:
// grpc://<service>.<namespace>.svc.<domain>.:<port>, the host and port of StepURL.
func stepGRPCURL(p *pipelinev1.Pipeline, i int, domain ClusterDomain) string {
	return stepServiceURL("grpc", p, i, domain)
}

// stepServiceURL is scheme://<service>.<namespace>.svc.<domain>.:<port> of step i's Service.
func stepServiceURL(scheme string, p *pipelinev1.Pipeline, i int, domain ClusterDomain) string {
	return fmt.Sprintf("%s://%s:%d", scheme, domain.ServiceHost(StepObjectName(p, i), p.Namespace), StepPort(p, i))
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
// the conversion data names as leading (Pipeline.LeadingEnv: the args of the earlier API
// version), in their order, then the variables the operator injects, then the step's other env
// entries, in their order. A Pipeline made in the earlier version keeps the order that version
// gave its step's container (args sorted by name, the injected variables, env), and with it its
// pods.
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

// leadingEnvVar is env entry e of LeadingEnv. One with a value is written as the earlier API
// version wrote its arg, with the value even when it is empty.
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
	withServerFields(container, p, i)

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
	withServerPodFields(pod, s)

	template := corev1ac.PodTemplateSpec()
	if m := s.PodMetadata; m != nil {
		// The step's own labels first: the operator's, which select and name the pods, win.
		template.WithLabels(userPodMetadata(m.Labels, IsReservedLabel))
		if a := userPodMetadata(m.Annotations, IsReservedAnnotation); len(a) > 0 {
			template.WithAnnotations(a)
		}
	}
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(StepSelector(p, i))).
		WithTemplate(template.
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

// withServerFields gives the container of step i what a model server may ask for: its command
// and arguments as the step writes them, and its probes (StepProbes: the step's, and its
// protocol's where it declares none). A step that sets none of them gets none, and runs its
// image's entrypoint.
func withServerFields(c *corev1ac.ContainerApplyConfiguration, p *pipelinev1.Pipeline, i int) {
	s := &p.Spec.Steps[i]
	if len(s.Command) > 0 {
		c.WithCommand(s.Command...)
	}
	if len(s.Args) > 0 {
		c.WithArgs(s.Args...)
	}
	readiness, liveness, startup := StepProbes(p, i)
	if readiness != nil {
		c.WithReadinessProbe(Convert[corev1ac.ProbeApplyConfiguration](*readiness))
	}
	if liveness != nil {
		c.WithLivenessProbe(Convert[corev1ac.ProbeApplyConfiguration](*liveness))
	}
	if startup != nil {
		c.WithStartupProbe(Convert[corev1ac.ProbeApplyConfiguration](*startup))
	}
	if s.SharedMemorySize != nil {
		c.WithVolumeMounts(corev1ac.VolumeMount().WithName(SharedMemoryVolumeName).WithMountPath(SharedMemoryPath))
	}
}

// withServerPodFields gives the step's pod what a model server may ask for: a RuntimeClass,
// shared memory (a memory-backed emptyDir of sharedMemorySize), the Secrets to pull its image
// with and its termination grace period. A step that sets none of them gets none.
func withServerPodFields(pod *corev1ac.PodSpecApplyConfiguration, s pipelinev1.Step) {
	if s.RuntimeClassName != "" {
		pod.WithRuntimeClassName(s.RuntimeClassName)
	}
	if s.SharedMemorySize != nil {
		pod.WithVolumes(corev1ac.Volume().
			WithName(SharedMemoryVolumeName).
			WithEmptyDir(corev1ac.EmptyDirVolumeSource().
				WithMedium(corev1.StorageMediumMemory).
				WithSizeLimit(*s.SharedMemorySize)))
	}
	for _, secret := range s.ImagePullSecrets {
		pod.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(secret.Name))
	}
	if s.TerminationGracePeriodSeconds != nil {
		pod.WithTerminationGracePeriodSeconds(*s.TerminationGracePeriodSeconds)
	}
}

// userPodMetadata are the entries of m, a step's podMetadata labels or annotations, whose keys
// reserved does not claim for the operator (the admission webhook refuses those; a Pipeline
// stored without it does not get them on its pods either). Nil when none is left.
func userPodMetadata(m map[string]string, reserved func(string) bool) map[string]string {
	var out map[string]string
	for k, v := range m {
		if reserved(k) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(m))
		}
		out[k] = v
	}
	return out
}

// StepService is the Service in front of step i's pods: ClusterIP, or for the entry
// step the type spec.expose asks for. Node ports are left to the apiserver, which allocates
// them for NodePort and LoadBalancer and drops them when the type returns to ClusterIP. The
// port of a step of protocol OpenInferenceProtocolGRPC says it speaks HTTP/2 without TLS
// (appProtocol kubernetes.io/h2c), for the proxies and meshes that read it.
func StepService(p *pipelinev1.Pipeline, i int) *corev1ac.ServiceApplyConfiguration {
	port := StepPort(p, i)
	sp := corev1ac.ServicePort().
		WithName(portName).
		WithProtocol(corev1.ProtocolTCP).
		WithPort(port).
		WithTargetPort(intstr.FromInt32(port))
	if GRPC(p, i) {
		sp.WithAppProtocol(AppProtocolH2C)
	}
	return corev1ac.Service(StepObjectName(p, i), p.Namespace).
		WithLabels(StepLabels(p, i)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(stepServiceType(p, i)).
			WithSelector(StepSelector(p, i)).
			WithPorts(sp))
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
