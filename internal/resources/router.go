package resources

import (
	"cmp"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

// EnvRouterImage is the manager's environment variable naming the image the router runs from.
// config/manager sets it to the manager's own image (the router binary ships in it), and OLM
// lists it among the bundle's related images.
const EnvRouterImage = "RELATED_IMAGE_ROUTER"

// The router's pod: the binary of the manager image, its configuration from the ConfigMap, and
// the ports of cmd/router.
const (
	routerContainerName  = "router"
	routerBinary         = "/router"
	RouterConfigKey      = "config.json"
	routerConfigVolume   = "config"
	routerConfigDir      = "/etc/pipeline-router"
	routerPort           = int32(8080)
	routerMetricsPort    = int32(9090)
	routerMetricsName    = "metrics"
	RouterServicePort    = int32(80)
	componentRouter      = "router"
	routerLabelName      = "pipeline-router"
	routerProbePeriod    = int32(10)
	routerLivenessDelay  = int32(5)
	routerReadinessDelay = int32(1)
)

// routerGRPCPort is the port of the router's Open Inference Protocol gRPC service (HTTP/2
// without TLS), on its container and its Service alike: the port named grpc.
const (
	routerGRPCPort = int32(8081)
	routerGRPCName = "grpc"
)

// A router pod that is replaced keeps serving for routerShutdownDelay after SIGTERM while its
// readiness fails (endpoints and proxies stop sending it requests), then gives the requests in
// flight up to RouterDrainTimeout; its grace period covers both, and routerGraceMargin more.
const (
	routerShutdownDelay = 5 * time.Second
	routerGraceMargin   = 5 * time.Second
	// routerMaxDrain caps the drain: a rollout or a node drain waits that long at most for a
	// router pod, whatever the steps' timeouts.
	routerMaxDrain = 10 * time.Minute
)

// RouterDrainTimeout is how long a stopping router pod lets the requests in flight run: the
// longest one request may take (receiving its body, the request deadline of its configuration:
// every step's timeout once per attempt and the back-off before each retry, and writing its
// answer), capped at routerMaxDrain.
func RouterDrainTimeout(p *pipelinev1.Pipeline) time.Duration {
	// The steps' URLs do not count: any domain will do.
	return min(RouterConfig(p, DefaultClusterDomain).LongestRequest(), routerMaxDrain)
}

// routerMemoryLimitTenths is the share, in tenths, of the router container's memory limit
// given to the Go runtime as GOMEMLIMIT.
const routerMemoryLimitTenths = 9

// AnnotationRouterConfigHash is the annotation, on the router's pod template, holding the hash of the router's
// configuration: a changed configuration changes the template, so the router's pods restart
// with it (the router reads its configuration once, at start).
const AnnotationRouterConfigHash = "distri-infer.ndsl.cn/router-config-hash"

// RouterMetricName is the step label of the router's series of the failover counter: no step
// may be named router with dataPath.mode Router.
const RouterMetricName = componentRouter

// RouterEnabled reports whether p asks for the router: dataPath.mode Router.
func RouterEnabled(p *pipelinev1.Pipeline) bool {
	return p.Spec.RouterEnabled()
}

// routerSettings are the router's settings, dataPath.router: empty (the defaults apply) when the
// spec gives none or runs no router.
func routerSettings(p *pipelinev1.Pipeline) *pipelinev1.Router {
	if rt := p.Spec.RouterSettings(); rt != nil {
		return rt
	}
	return &pipelinev1.Router{}
}

// IsRouterObject reports whether obj is one of the router's objects (and not, say, the
// Deployment of a step named router).
func IsRouterObject(obj client.Object) bool {
	return obj.GetLabels()[LabelName] == routerLabelName
}

// RouterObjectName names the router's ConfigMap, Deployment and Service: <pipeline>-router.
func RouterObjectName(p *pipelinev1.Pipeline) string {
	return childName(p.Name, componentRouter)
}

// routerLabels are the labels of the router's ConfigMap, Deployment, Service and pods.
func routerLabels(p *pipelinev1.Pipeline) map[string]string {
	l := commonLabels(p, componentRouter)
	l[LabelName] = routerLabelName
	return l
}

// RouterSelector selects the router's pods. Steps select theirs by step name, and no step may
// be named router with dataPath.mode Router.
func RouterSelector(p *pipelinev1.Pipeline) map[string]string {
	return map[string]string{
		LabelPipeline:  p.Name,
		LabelComponent: componentRouter,
		LabelName:      routerLabelName,
	}
}

// RouterConfig is the router's configuration: every step in order, called at
// InferPath of its Service (named in the cluster's DNS domain, domain) with its timeout,
// retries and stopWhen; for an Open Inference Protocol step also where its model's metadata is
// read, and its mapped inputs. A step of the protocol's gRPC service is called at
// grpc://<host>:<port> of its Service, naming its model.
func RouterConfig(p *pipelinev1.Pipeline, domain ClusterDomain) routerconfig.Config {
	cfg := routerconfig.Config{
		Pipeline: p.Namespace + "/" + p.Name,
		Steps:    make([]routerconfig.Step, 0, len(p.Spec.Steps)),
	}
	rt := routerSettings(p)
	if rt.MaxBodyBytes != nil {
		cfg.MaxBodyBytes = *rt.MaxBodyBytes
	}
	if rt.RequestTimeoutSeconds != nil {
		cfg.RequestTimeoutSeconds = float64(*rt.RequestTimeoutSeconds)
	}
	for _, out := range rt.Outputs {
		cfg.Outputs = append(cfg.Outputs, routerconfig.TensorOutput{Name: out.Name, Step: out.Step, Tensor: out.Tensor})
	}
	for _, h := range rt.PropagateHeaders {
		// Admission refuses the names the router sets or drops itself, except those a Pipeline
		// had before the list grew: left out here, so that the router loads its configuration.
		if routerconfig.CheckPropagatedHeader(string(h)) == nil {
			cfg.PropagateHeaders = append(cfg.PropagateHeaders, string(h))
		}
	}
	for i, s := range p.Spec.Steps {
		step := routerconfig.Step{
			Name:       StepName(p, i),
			URL:        StepURL(p, i, domain) + InferPath(p, i),
			StopWhen:   s.StopWhen,
			Idempotent: s.Idempotent,
		}
		if s.TimeoutSeconds != nil {
			step.TimeoutSeconds = float64(*s.TimeoutSeconds)
		}
		if s.Retries != nil {
			step.Retries = int(*s.Retries)
		}
		switch {
		case GRPC(p, i):
			// The router calls ModelInfer and ModelMetadata naming the model, at the Service's
			// address: no path, no metadata URL.
			step.Protocol = routerconfig.ProtocolOpenInferenceGRPC
			step.URL = stepGRPCURL(p, i, domain)
			step.Model = ServedModelName(p, i)
		case OpenInference(p, i):
			step.Protocol = routerconfig.ProtocolOpenInference
			step.MetadataURL = StepURL(p, i, domain) + oipModelPath(p, i, "")
		}
		for _, in := range s.Inputs {
			step.Inputs = append(step.Inputs, routerconfig.TensorInput{Name: in.Name, Step: in.Step, Tensor: in.Tensor})
		}
		step.Outputs = s.Outputs
		cfg.Steps = append(cfg.Steps, step)
	}
	return cfg
}

// RouterConfigJSON is the content of the router's ConfigMap key config.json, in a cluster whose
// DNS domain is domain.
func RouterConfigJSON(p *pipelinev1.Pipeline, domain ClusterDomain) (string, error) {
	data, err := json.MarshalIndent(RouterConfig(p, domain), "", "  ")
	if err != nil {
		return "", fmt.Errorf("marshal router config: %w", err)
	}
	return string(data), nil
}

// RouterConfigMap is the ConfigMap holding the router's configuration, config.
func RouterConfigMap(p *pipelinev1.Pipeline, config string) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(RouterObjectName(p), p.Namespace).
		WithLabels(routerLabels(p)).
		WithOwnerReferences(ownerReference(p)).
		WithData(map[string]string{RouterConfigKey: config})
}

// RouterDeployment is the router's Deployment: image runs cmd/router with config (the
// content of the ConfigMap, whose hash is on the pod template), pinned to the node named node:
// the node placement chose among dataPath.router.location and fallbackLocations (see
// nodes.Decide), resolved to its name; empty is the name location when the router has one.
// The router image runs as a non-root user and writes no file, so its pods meet the restricted
// Pod Security level in every namespace.
func RouterDeployment(p *pipelinev1.Pipeline, image, config, node string) *appsv1ac.DeploymentApplyConfiguration {
	rt := routerSettings(p)
	labels := routerLabels(p)
	probe := func(path string, delay int32) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath(path).WithPort(intstr.FromString(routerMetricsName))).
			WithInitialDelaySeconds(delay).
			WithPeriodSeconds(routerProbePeriod)
	}
	drain := RouterDrainTimeout(p)
	container := corev1ac.Container().
		WithName(routerContainerName).
		WithImage(image).
		WithCommand(routerBinary).
		WithArgs(
			"--config="+path.Join(routerConfigDir, RouterConfigKey),
			"--listen=:"+strconv.Itoa(int(routerPort)),
			"--grpc-listen=:"+strconv.Itoa(int(routerGRPCPort)),
			"--metrics-listen=:"+strconv.Itoa(int(routerMetricsPort)),
			"--shutdown-delay="+routerShutdownDelay.String(),
			"--shutdown-timeout="+drain.String(),
		).
		WithPorts(
			corev1ac.ContainerPort().WithName(portName).WithContainerPort(routerPort).WithProtocol(corev1.ProtocolTCP),
			corev1ac.ContainerPort().WithName(routerGRPCName).WithContainerPort(routerGRPCPort).WithProtocol(corev1.ProtocolTCP),
			corev1ac.ContainerPort().WithName(routerMetricsName).WithContainerPort(routerMetricsPort).WithProtocol(corev1.ProtocolTCP),
		).
		WithVolumeMounts(corev1ac.VolumeMount().
			WithName(routerConfigVolume).
			WithMountPath(routerConfigDir).
			WithReadOnly(true)).
		WithLivenessProbe(probe("/healthz", routerLivenessDelay)).
		WithReadinessProbe(probe("/readyz", routerReadinessDelay)).
		WithSecurityContext(routerSecurityContext())
	if rt.Resources != nil {
		container.WithResources(Convert[corev1ac.ResourceRequirementsApplyConfiguration](*rt.Resources))
		if limit, ok := rt.Resources.Limits[corev1.ResourceMemory]; ok && limit.Value() > 0 {
			// The Go runtime collects harder near the limit instead of being killed at it.
			container.WithEnv(corev1ac.EnvVar().WithName("GOMEMLIMIT").
				WithValue(strconv.FormatInt(limit.Value()/10*routerMemoryLimitTenths, 10)))
		}
	}

	pod := corev1ac.PodSpec().
		WithSecurityContext(StepPodSecurityContext()).
		// Nothing in the pod calls the Kubernetes API: no ServiceAccount token to steal.
		WithAutomountServiceAccountToken(false).
		// No variables naming every Service of the namespace (see podEnablesServiceLinks).
		WithEnableServiceLinks(podEnablesServiceLinks).
		WithContainers(container).
		WithVolumes(corev1ac.Volume().
			WithName(routerConfigVolume).
			WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(RouterObjectName(p))))
	grace := routerShutdownDelay + drain + routerGraceMargin
	pod.WithTerminationGracePeriodSeconds(int64(grace / time.Second))
	if node = cmp.Or(node, rt.Location); node != "" {
		pod.WithAffinity(pinnedTo(node))
	} else {
		// Spread over nodes where the cluster allows it: one node's failure leaves a router.
		pod.WithTopologySpreadConstraints(corev1ac.TopologySpreadConstraint().
			WithMaxSkew(1).
			WithTopologyKey(corev1.LabelHostname).
			WithWhenUnsatisfiable(corev1.ScheduleAnyway).
			WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(RouterSelector(p))).
			// The pods of one revision are spread: during a rollout, the old ones about to go
			// are not counted.
			WithMatchLabelKeys(appsv1.DefaultDeploymentUniqueLabelKey))
	}

	return appsv1ac.Deployment(RouterObjectName(p), p.Namespace).
		WithLabels(labels).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(rt.EffectiveReplicas()).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(RouterSelector(p))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithAnnotations(map[string]string{AnnotationRouterConfigHash: RouterConfigHash(config)}).
				WithSpec(pod)))
}

// routerSecurityContext is the security context of the router's container: the restricted
// level's (non-root, no privilege escalation, every capability dropped) and a read-only root
// filesystem.
func routerSecurityContext() *corev1ac.SecurityContextApplyConfiguration {
	return StepSecurityContext(pipelinev1.Step{}, PodSecurityRestricted).
		WithReadOnlyRootFilesystem(true)
}

// RouterService is the Service in front of the router's pods: http (port 80) to the
// router's listen port, and grpc (port 8081) to its Open Inference Protocol gRPC service,
// HTTP/2 without TLS (appProtocol kubernetes.io/h2c). It is the Pipeline's entry, so its type
// is spec.expose.serviceType. The metrics port stays off it: a NodePort or LoadBalancer Service
// would publish it outside the cluster, and Prometheus scrapes the pods
// (config/prometheus/router-monitor.yaml).
func RouterService(p *pipelinev1.Pipeline) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(RouterObjectName(p), p.Namespace).
		WithLabels(routerLabels(p)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(EntryServiceType(p)).
			WithSelector(RouterSelector(p)).
			WithPorts(
				corev1ac.ServicePort().
					WithName(portName).
					WithProtocol(corev1.ProtocolTCP).
					WithPort(RouterServicePort).
					WithTargetPort(intstr.FromString(portName)),
				corev1ac.ServicePort().
					WithName(routerGRPCName).
					WithProtocol(corev1.ProtocolTCP).
					WithAppProtocol(AppProtocolH2C).
					WithPort(routerGRPCPort).
					WithTargetPort(intstr.FromString(routerGRPCName))))
}

// RouterPDB is the router's PodDisruptionBudget: one router pod at a time may be evicted, so
// that a drain leaves the others serving. It exists only where it cannot block a drain
// (RouterWantsDisruptionBudget, and two nodes that can hold the router's pods).
func RouterPDB(p *pipelinev1.Pipeline) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(RouterObjectName(p), p.Namespace).
		WithLabels(routerLabels(p)).
		WithOwnerReferences(ownerReference(p)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(RouterSelector(p))).
			WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow))
}

// RouterWantsDisruptionBudget reports whether the spec allows the router a disruption budget:
// more than one pod, not pinned to one node by location (its pods could then not move, and a
// drain of that node would wait for ever).
func RouterWantsDisruptionBudget(p *pipelinev1.Pipeline) bool {
	rt := routerSettings(p)
	return RouterEnabled(p) && rt.EffectiveReplicas() > 1 && rt.Location == ""
}

// RouterConfigHash is the hash of the router's configuration config, on its pod template.
func RouterConfigHash(config string) string {
	return shortHash(config)
}
