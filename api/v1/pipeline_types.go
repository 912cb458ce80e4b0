package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations of v1beta1 that v1 turned into fields. A v1beta1 Pipeline that carries one with
// the value "true" converts to a v1 Pipeline with the field set, and back.
const (
	// PausedAnnotation is v1beta1's spec.paused.
	PausedAnnotation = "distri-infer.ndsl.cn/paused"
	// FailbackAnnotation is v1beta1's spec.failover.failbackNow.
	FailbackAnnotation = "distri-infer.ndsl.cn/failback"
	// ConversionDataAnnotation holds, as JSON, what the other version of the Pipeline says and
	// this one cannot hold, so that converting back gives the object converted. The conversion
	// writes and removes it; do not edit it.
	ConversionDataAnnotation = "distri-infer.ndsl.cn/conversion-data"
	// StorageIdentityAnnotation records the identity of the Pipeline's model storage, which
	// names its PersistentVolume and claim (see Pipeline.StorageIdentity), as JSON:
	// {"parts": [...], "storage": "<fingerprint>"}. parts are the identity without the
	// Pipeline's namespace and name; storage is StorageFingerprint of the spec.modelStorage they
	// were recorded for: once the storage changes, they no longer apply, and the storage gets
	// the names of the new spec. The conversion and the operator write it; do not edit it.
	StorageIdentityAnnotation = "distri-infer.ndsl.cn/storage-identity"
)

// CleanupFinalizer is the finalizer of every Pipeline: the operator deletes the Pipeline's
// cluster-scoped PersistentVolume, which cannot carry an owner reference to it, before the
// Pipeline goes. The defaulting webhook adds it when a Pipeline is created; the operator adds it
// to a Pipeline that lacks it (created while the webhooks were off).
const CleanupFinalizer = "distri-infer.ndsl.cn/cleanup"

// PipelineSpec is the desired state of a Pipeline.
// +kubebuilder:validation:XValidation:rule="!has(self.dataPath) || self.dataPath.mode != 'Router' || self.steps.all(s, s.name != 'router')",message="a step named router would share the name <pipeline>-router with the router's Deployment and Service: rename the step, or set dataPath.mode to Chain"
type PipelineSpec struct {
	// steps are the stages of the pipeline, in order, each with a name of its own.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Steps"
	Steps []Step `json:"steps,omitempty"`

	// modelStorage is the shared storage every step mounts read-only: exactly one kind of
	// storage, named by type.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Model Storage"
	ModelStorage ModelStorage `json:"modelStorage,omitzero"`

	// dataPath says how a request travels from step to step: the steps forward it themselves
	// (Chain, the default) or the router calls them (Router), in order, or at the same time
	// where their inputs do not wait for one another.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Data Path"
	DataPath *DataPath `json:"dataPath,omitempty"`

	// expose says how the pipeline's entry (the first step, or the router with dataPath.mode
	// Router) is reached from outside the cluster. Without it every step has a ClusterIP
	// Service only.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Expose",xDescriptors="urn:alm:descriptor:com.tectonic.ui:advanced"
	Expose *Expose `json:"expose,omitempty"`

	// failover says when steps, and the router, with fallbackLocations move to another node
	// and back. Without it the defaults apply (afterSeconds 60, failback Automatic,
	// failbackAfterSeconds 300).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Failover",xDescriptors="urn:alm:descriptor:com.tectonic.ui:advanced"
	Failover *Failover `json:"failover,omitempty"`

	// paused true stops the operator from touching the Pipeline's children: drift is
	// not repaired and spec changes are not applied until it is false or removed. Deleting a
	// paused Pipeline still removes its children. v1beta1 says this with the annotation
	// distri-infer.ndsl.cn/paused: "true".
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Paused",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	Paused *bool `json:"paused,omitempty"` //nolint:kubeapilinter // nobools: on or off, as v1beta1's annotation "true"; no third state is foreseen.
}

// Step is one stage of a Pipeline: a container that loads one model, pinned to one node.
// +kubebuilder:validation:XValidation:rule="!has(self.fallbackLocations) || size(self.fallbackLocations) == 0 || has(self.location)",message="fallbackLocations needs location: a step that is not pinned to a node has nothing to fail over from"
// +kubebuilder:validation:XValidation:rule="!has(self.fallbackLocations) || !has(self.location) || !(self.location in self.fallbackLocations)",message="fallbackLocations must not repeat location: list only the other nodes the step may move to"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.replicas)",message="set replicas or autoscaling, not both: with autoscaling the HorizontalPodAutoscaler sets the number of pods between autoscaling.minReplicas and autoscaling.maxReplicas (remove replicas)"
// +kubebuilder:validation:XValidation:rule="!has(self.inputs) || size(self.inputs) == 0 || (has(self.protocol) && self.protocol in ['OpenInferenceProtocol', 'OpenInferenceProtocolGRPC'])",message="inputs map tensors of the Open Inference Protocol: set protocol to OpenInferenceProtocol or OpenInferenceProtocolGRPC, or remove inputs"
// +kubebuilder:validation:XValidation:rule="!has(self.outputs) || size(self.outputs) == 0 || (has(self.inputs) && size(self.inputs) > 0)",message="outputs are asked for in the request the router makes of inputs: add inputs, or remove outputs"
// +kubebuilder:validation:XValidation:rule="!has(self.modelLoadTimeoutSeconds) || (has(self.protocol) && self.protocol in ['OpenInferenceProtocol', 'OpenInferenceProtocolGRPC'] && !has(self.startupProbe))",message="modelLoadTimeoutSeconds is the patience of the default startup probe of protocols OpenInferenceProtocol and OpenInferenceProtocolGRPC: set protocol to one of them and declare no startupProbe, or remove modelLoadTimeoutSeconds"
type Step struct {
	// name identifies the step: it names the step's Deployment and Service
	// (<pipeline>-<name>) and is its STEP_NAME. Unique among the steps.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// image is the container image of the step.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// location is the name of the node the step must run on: its pods are pinned by node name
	// (a required node affinity on metadata.name). A location no node is named after names the
	// one node whose kubernetes.io/hostname label it is. Without it the scheduler chooses.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Location string `json:"location,omitempty"`

	// fallbackLocations are the nodes the step moves to, in order of preference, when the node
	// it runs on has been not ready for spec.failover.afterSeconds: its Deployment is pinned to
	// the first ready node of [location, fallbackLocations...]. Requires location.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.all(n, self.exists_one(m, m == n))",message="fallbackLocations must not name a node twice"
	// +listType=atomic
	FallbackLocations []string `json:"fallbackLocations,omitempty"`

	// model is the model's directory inside the model storage; the step finds it at
	// MODEL_PATH (<mountPath>/<model>).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.]?(/|$)')",message="model must not contain '.' or '..' path segments"
	Model string `json:"model,omitempty"`

	// port is the port the step's container listens on, and the port of its Service.
	// +optional
	// +kubebuilder:default=80
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1, so that unset and set convert one to one, without conversion data.

	// env are the environment variables of the step's container, after the ones the operator
	// sets (MODEL_NAME, MODEL_PATH, PIPELINE_NAME, STEP_NAME, STEP_INDEX, NEXT_STEP_URL): an
	// entry of one of those names replaces the operator's value. v1beta1's args are entries
	// with a value. Names are at most 256 characters, values at most 32 KiB (the kernel takes at
	// most 128 KiB per variable, and the Pipeline holds every value), the names, keys and paths
	// of valueFrom at most 253 or 512. Names must be non-empty without '=' or whitespace: the
	// admission webhook checks it (a pattern over every name would exceed the CRD's cost budget).
	// +optional
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:XValidation:rule="self.all(e, size(e.name) <= 256)",message="env names must be at most 256 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.value) || size(e.value) <= 32768)",message="env values must be at most 32768 characters (32 KiB): larger configuration belongs in the model storage"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || ((!has(e.valueFrom.configMapKeyRef) || (size(e.valueFrom.configMapKeyRef.key) <= 253 && (!has(e.valueFrom.configMapKeyRef.name) || size(e.valueFrom.configMapKeyRef.name) <= 253))) && (!has(e.valueFrom.secretKeyRef) || (size(e.valueFrom.secretKeyRef.key) <= 253 && (!has(e.valueFrom.secretKeyRef.name) || size(e.valueFrom.secretKeyRef.name) <= 253))) && (!has(e.valueFrom.fieldRef) || (size(e.valueFrom.fieldRef.fieldPath) <= 512 && (!has(e.valueFrom.fieldRef.apiVersion) || size(e.valueFrom.fieldRef.apiVersion) <= 253))) && (!has(e.valueFrom.resourceFieldRef) || (size(e.valueFrom.resourceFieldRef.resource) <= 253 && (!has(e.valueFrom.resourceFieldRef.containerName) || size(e.valueFrom.resourceFieldRef.containerName) <= 253))) && (!has(e.valueFrom.fileKeyRef) || (size(e.valueFrom.fileKeyRef.key) <= 253 && size(e.valueFrom.fileKeyRef.volumeName) <= 253 && size(e.valueFrom.fileKeyRef.path) <= 512))))",message="env valueFrom: names and keys must be at most 253 characters, fieldRef.fieldPath and fileKeyRef.path at most 512"
	// +listType=map
	// +listMapKey=name
	Env []corev1.EnvVar `json:"env,omitempty"`

	// replicas is the number of pods of the step; 1 when unset. Excludes autoscaling.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1, so that unset and set convert one to one, without conversion data.

	// autoscaling makes a HorizontalPodAutoscaler own the step's number of pods;
	// the operator then no longer sets the Deployment's replicas.
	// +optional
	Autoscaling *StepAutoscaling `json:"autoscaling,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1: absent means the step is not autoscaled.

	// resources are the compute resources of the step's container.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.limits) || size(self.limits) <= 16) && (!has(self.requests) || size(self.requests) <= 16)",message="resources: at most 16 limits and 16 requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || size(self.claims) == 0",message="resources.claims is not supported: the operator declares no resource claims in the pod for the container to use"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector adds node labels the step's pods require, besides location.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && size(self[k]) <= 63)",message="nodeSelector keys must be at most 317 characters (a label key) and values at most 63 (a label value)"
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the step's pods run on tainted nodes.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(t, (!has(t.key) || size(t.key) <= 317) && (!has(t.value) || size(t.value) <= 63) && (!has(t.operator) || size(t.operator) <= 16) && (!has(t.effect) || size(t.effect) <= 16))",message="tolerations: key must be at most 317 characters (a label key), value at most 63 (a label value), operator and effect at most 16"
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// securityContext is the security context of the step's container. When set it replaces
	// the operator's defaults (allowPrivilegeEscalation false; in a namespace that enforces the
	// restricted Pod Security level also runAsNonRoot true and every capability dropped).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.capabilities) || ((!has(self.capabilities.add) || size(self.capabilities.add) <= 64) && (!has(self.capabilities.drop) || size(self.capabilities.drop) <= 64))",message="securityContext.capabilities: at most 64 capabilities to add and 64 to drop"
	// +kubebuilder:validation:XValidation:rule="(!has(self.seLinuxOptions) || ((!has(self.seLinuxOptions.user) || size(self.seLinuxOptions.user) <= 256) && (!has(self.seLinuxOptions.role) || size(self.seLinuxOptions.role) <= 256) && (!has(self.seLinuxOptions.type) || size(self.seLinuxOptions.type) <= 256) && (!has(self.seLinuxOptions.level) || size(self.seLinuxOptions.level) <= 256))) && (!has(self.procMount) || size(self.procMount) <= 16)",message="securityContext: seLinuxOptions fields must be at most 256 characters, procMount at most 16"
	// +kubebuilder:validation:XValidation:rule="(!has(self.seccompProfile) || (size(self.seccompProfile.type) <= 32 && (!has(self.seccompProfile.localhostProfile) || size(self.seccompProfile.localhostProfile) <= 4096))) && (!has(self.appArmorProfile) || (size(self.appArmorProfile.type) <= 32 && (!has(self.appArmorProfile.localhostProfile) || size(self.appArmorProfile.localhostProfile) <= 4096))) && (!has(self.windowsOptions) || ((!has(self.windowsOptions.gmsaCredentialSpecName) || size(self.windowsOptions.gmsaCredentialSpecName) <= 256) && (!has(self.windowsOptions.gmsaCredentialSpec) || size(self.windowsOptions.gmsaCredentialSpec) <= 65536) && (!has(self.windowsOptions.runAsUserName) || size(self.windowsOptions.runAsUserName) <= 256)))",message="securityContext: seccompProfile and appArmorProfile types must be at most 32 characters and localhost profiles at most 4096; windowsOptions names at most 256 and gmsaCredentialSpec at most 65536"
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`

	// timeoutSeconds is the router's deadline for one call to the step, in seconds (30 when
	// unset). Read only with dataPath.mode Router.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1, so that unset and set convert one to one, without conversion data.

	// retries is how many times the router calls the step again after a 5xx answer, a
	// connection error or a timeout (0 when unset). Read only with dataPath.mode Router.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	Retries *int32 `json:"retries,omitempty"`

	// idempotent false says the step must not get the same request twice: the router then calls
	// it again only when the call could not be made at all (nothing was sent), never after a
	// timeout or an answer. True when unset. Read only with dataPath.mode Router.
	// +optional
	Idempotent *bool `json:"idempotent,omitempty"` //nolint:kubeapilinter // nobools: a step may get a request twice or not; as in v1beta1, so that it converts one to one.

	// stopWhen is a CEL expression over the step's response (response, status, headers): when
	// it is true the router ends the pipeline with this step's answer (see docs/router.md).
	// Read only with dataPath.mode Router.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	StopWhen string `json:"stopWhen,omitempty"`

	// command is the entrypoint of the step's container, as a Kubernetes container's command:
	// it replaces the image's ENTRYPOINT, runs without a shell, and $(VAR) names a variable of
	// the container's environment. Without command and args the image's own entrypoint and
	// arguments run.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	Command []string `json:"command,omitempty"`

	// args are the arguments of the step container's entrypoint, as a Kubernetes container's
	// args: they replace the image's CMD, and $(VAR) names a variable of the container's
	// environment. These are not v1beta1's args, which are environment variables (env entries
	// in v1).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	Args []string `json:"args,omitempty"`

	// readinessProbe is the readiness probe of the step's container, as written: until it
	// succeeds the step's Service sends the pod nothing and the pod does not count as available.
	// One handler (exec, httpGet, tcpSocket or grpc); a port is a number or http, the name of
	// the container's port. The admission webhook checks the handler, the ports and the lengths
	// of exec.command and httpGet.httpHeaders entries.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.exec) || !has(self.exec.command) || size(self.exec.command) <= 64) && (!has(self.httpGet) || ((!has(self.httpGet.httpHeaders) || size(self.httpGet.httpHeaders) <= 16) && (!has(self.httpGet.path) || size(self.httpGet.path) <= 2048) && (!has(self.httpGet.host) || size(self.httpGet.host) <= 253) && (!has(self.httpGet.scheme) || size(self.httpGet.scheme) <= 16) && (!has(self.httpGet.protocol) || size(self.httpGet.protocol) <= 16) && (type(self.httpGet.port) != string || size(self.httpGet.port) <= 15))) && (!has(self.tcpSocket) || ((!has(self.tcpSocket.host) || size(self.tcpSocket.host) <= 253) && (type(self.tcpSocket.port) != string || size(self.tcpSocket.port) <= 15))) && (!has(self.grpc) || ((!has(self.grpc.service) || size(self.grpc.service) <= 253) && (!has(self.grpc.mode) || size(self.grpc.mode) <= 16)))",message="readinessProbe: at most 64 exec.command items and 16 httpGet.httpHeaders; httpGet.path at most 2048 characters, hosts and grpc.service at most 253, a named port at most 15, httpGet.scheme, httpGet.protocol and grpc.mode at most 16"
	ReadinessProbe *corev1.Probe `json:"readinessProbe,omitempty"`

	// livenessProbe is the liveness probe of the step's container, as written: the kubelet
	// restarts the container when it fails. The rules of readinessProbe apply; successThreshold
	// is 1.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.exec) || !has(self.exec.command) || size(self.exec.command) <= 64) && (!has(self.httpGet) || ((!has(self.httpGet.httpHeaders) || size(self.httpGet.httpHeaders) <= 16) && (!has(self.httpGet.path) || size(self.httpGet.path) <= 2048) && (!has(self.httpGet.host) || size(self.httpGet.host) <= 253) && (!has(self.httpGet.scheme) || size(self.httpGet.scheme) <= 16) && (!has(self.httpGet.protocol) || size(self.httpGet.protocol) <= 16) && (type(self.httpGet.port) != string || size(self.httpGet.port) <= 15))) && (!has(self.tcpSocket) || ((!has(self.tcpSocket.host) || size(self.tcpSocket.host) <= 253) && (type(self.tcpSocket.port) != string || size(self.tcpSocket.port) <= 15))) && (!has(self.grpc) || ((!has(self.grpc.service) || size(self.grpc.service) <= 253) && (!has(self.grpc.mode) || size(self.grpc.mode) <= 16)))",message="livenessProbe: at most 64 exec.command items and 16 httpGet.httpHeaders; httpGet.path at most 2048 characters, hosts and grpc.service at most 253, a named port at most 15, httpGet.scheme, httpGet.protocol and grpc.mode at most 16"
	LivenessProbe *corev1.Probe `json:"livenessProbe,omitempty"`

	// startupProbe is the startup probe of the step's container, as written: the other probes
	// wait until it succeeds, so a model that loads for minutes needs no long liveness delay.
	// The rules of readinessProbe apply; successThreshold is 1.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.exec) || !has(self.exec.command) || size(self.exec.command) <= 64) && (!has(self.httpGet) || ((!has(self.httpGet.httpHeaders) || size(self.httpGet.httpHeaders) <= 16) && (!has(self.httpGet.path) || size(self.httpGet.path) <= 2048) && (!has(self.httpGet.host) || size(self.httpGet.host) <= 253) && (!has(self.httpGet.scheme) || size(self.httpGet.scheme) <= 16) && (!has(self.httpGet.protocol) || size(self.httpGet.protocol) <= 16) && (type(self.httpGet.port) != string || size(self.httpGet.port) <= 15))) && (!has(self.tcpSocket) || ((!has(self.tcpSocket.host) || size(self.tcpSocket.host) <= 253) && (type(self.tcpSocket.port) != string || size(self.tcpSocket.port) <= 15))) && (!has(self.grpc) || ((!has(self.grpc.service) || size(self.grpc.service) <= 253) && (!has(self.grpc.mode) || size(self.grpc.mode) <= 16)))",message="startupProbe: at most 64 exec.command items and 16 httpGet.httpHeaders; httpGet.path at most 2048 characters, hosts and grpc.service at most 253, a named port at most 15, httpGet.scheme, httpGet.protocol and grpc.mode at most 16"
	StartupProbe *corev1.Probe `json:"startupProbe,omitempty"`

	// podMetadata are labels and annotations of the step's pods (the pod template of its
	// Deployment only: not the Deployment, its Service or other children). The operator's own
	// labels and every key under distri-infer.ndsl.cn/ are refused.
	// +optional
	PodMetadata *StepPodMetadata `json:"podMetadata,omitempty"`

	// runtimeClassName is the RuntimeClass of the step's pods (a GPU runtime, a sandbox).
	// Without it the cluster's default runtime runs them.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	RuntimeClassName string `json:"runtimeClassName,omitempty"`

	// sharedMemorySize is the size of /dev/shm in the step's container: a memory-backed
	// emptyDir of that size limit, mounted there (model servers that share tensors between
	// processes, such as Triton and PyTorch data loaders, need more than the runtime's 64 MiB).
	// Its use counts as the container's memory. Greater than zero and at most 64Gi (the
	// admission webhook checks it). Without it /dev/shm is the container runtime's.
	// +optional
	SharedMemorySize *resource.Quantity `json:"sharedMemorySize,omitempty"`

	// imagePullSecrets are Secrets, in the Pipeline's namespace, holding the credentials to
	// pull the step's image from a private registry.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(s, !has(s.name) || size(s.name) <= 253)",message="imagePullSecrets names must be at most 253 characters"
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// terminationGracePeriodSeconds is how long the step's pods may take to stop after
	// SIGTERM, in seconds, before they are killed: long enough for the requests in flight.
	// Without it Kubernetes' default applies (30 seconds).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// protocol is what the step's server speaks. HTTP (the default) is any HTTP server: the
	// router posts each request to the root of the step's Service and passes the answer on as
	// it is, and the step has only the probes it declares. OpenInferenceProtocol is the Open
	// Inference Protocol's REST API (KServe v2: Triton, MLServer, KServe runtimes): where the
	// step declares no probe of its own, it gets a readiness probe on /v2/models/<name>/ready, a
	// liveness probe on /v2/health/live and a startup probe on /v2/models/<name>/ready patient
	// for modelLoadTimeoutSeconds, <name> being the last element of model; and the router calls
	// POST /v2/models/<name>/infer. OpenInferenceProtocolGRPC is the same protocol's gRPC
	// service (inference.GRPCInferenceService) on port, over HTTP/2 without TLS: the router
	// calls ModelInfer for model <name>, and reads its ModelMetadata before it is ready; where
	// the step declares no probe of its own, it gets TCP readiness, liveness and startup probes
	// on port, the startup probe patient for modelLoadTimeoutSeconds. Kubernetes' grpc probes
	// speak the standard gRPC health service (grpc.health.v1), which not every model server
	// implements: a step whose server does may declare grpc probes of its own.
	// +optional
	Protocol StepProtocol `json:"protocol,omitempty"`

	// modelLoadTimeoutSeconds is how long the default startup probe of protocol
	// OpenInferenceProtocol or OpenInferenceProtocolGRPC waits for the model to load before the
	// container is restarted (600 when unset). Only with one of those protocols and no
	// startupProbe of the step's.
	// +optional
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	ModelLoadTimeoutSeconds *int32 `json:"modelLoadTimeoutSeconds,omitempty"` //nolint:kubeapilinter // optionalfields: absent means the default patience.

	// inputs make the step's request of tensors, under protocol OpenInferenceProtocol or
	// OpenInferenceProtocolGRPC with dataPath.mode Router: the router takes each from the
	// pipeline's request or from an earlier step's answer and gives it to the step's model under
	// the input's name, after checking every mapping against the models' metadata (see
	// docs/router.md). A step with inputs waits only for the steps they name: steps that do not
	// wait for one another run at the same time, and a step whose inputs name several is where
	// their branches join. Without inputs the step gets the previous step's answer as it is (the
	// pipeline's request for the first).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Inputs []StepTensorInput `json:"inputs,omitempty"`

	// outputs name the outputs of the step's model that its request asks for (the "outputs" of
	// the Open Inference Protocol request the router makes of inputs): the model then answers
	// those alone. The router checks them against the model's metadata before it is ready; a
	// later step's inputs and the pipeline's outputs may take from this step only these.
	// Without outputs the model answers every output. Requires inputs.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Outputs []string `json:"outputs,omitempty"`
}

// StepTensorInput is one input tensor of a step's request.
type StepTensorInput struct {
	// name is the input of the step's model that gets the tensor.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// step names the earlier step whose answer has the tensor among its outputs; that step's
	// protocol must be OpenInferenceProtocol or OpenInferenceProtocolGRPC. Without it the
	// tensor is an input of the pipeline's request.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Step string `json:"step,omitempty"`

	// tensor is the tensor's name in that answer, or in the pipeline's request.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Tensor string `json:"tensor,omitempty"`
}

// StepPodMetadata are labels and annotations the pods of a step carry besides the operator's.
type StepPodMetadata struct {
	// labels are added to the labels of the step's pods. Keys and values must be Kubernetes
	// label keys and values; the operator's labels (pipeline, step and its app.kubernetes.io
	// labels) and keys under distri-infer.ndsl.cn/ are refused.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && size(self[k]) <= 63)",message="podMetadata.labels keys must be at most 317 characters (a label key) and values at most 63 (a label value)"
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are the annotations of the step's pods. Keys must be Kubernetes annotation
	// keys, and keys under distri-infer.ndsl.cn/ are refused.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && size(self[k]) <= 4096)",message="podMetadata.annotations keys must be at most 317 characters (an annotation key) and values at most 4096"
	Annotations map[string]string `json:"annotations,omitempty"`
}

// StepAutoscaling makes a HorizontalPodAutoscaler scale a step's pods between minReplicas and
// maxReplicas on their CPU and memory utilization (a percentage of the container's requests).
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="autoscaling.minReplicas must not exceed autoscaling.maxReplicas"
type StepAutoscaling struct {
	// minReplicas is the fewest pods the step scales down to.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MinReplicas *int32 `json:"minReplicas,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1, so that unset and set convert one to one, without conversion data.

	// maxReplicas is the most pods the step scales up to.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReplicas int32 `json:"maxReplicas,omitempty"`

	// targetCPUUtilizationPercentage is the average CPU use of the step's pods, as a percentage
	// of their CPU request, that the autoscaler keeps them at. When neither this nor
	// targetMemoryUtilizationPercentage is set, the target is 80% CPU.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1, so that unset and set convert one to one, without conversion data.

	// targetMemoryUtilizationPercentage is the average memory use of the step's pods, as a
	// percentage of their memory request, that the autoscaler keeps them at. With both targets
	// the autoscaler follows the one that asks for more pods.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	TargetMemoryUtilizationPercentage *int32 `json:"targetMemoryUtilizationPercentage,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1, so that unset and set convert one to one, without conversion data.
}

// ModelStorageType names the kind of a Pipeline's model storage.
// +kubebuilder:validation:Enum=NFS;CSI;StorageClass;ExistingClaim;ModelStorageClass
type ModelStorageType string

const (
	// ModelStorageTypeNFS is an NFS export (modelStorage.nfs) mounted through an NFS
	// PersistentVolume that the operator creates.
	ModelStorageTypeNFS ModelStorageType = "NFS"
	// ModelStorageTypeCSI is a CSI PersistentVolume that the operator creates (modelStorage.csi).
	ModelStorageTypeCSI ModelStorageType = "CSI"
	// ModelStorageTypeStorageClass is a claim that a StorageClass provisions
	// (modelStorage.storageClass).
	ModelStorageTypeStorageClass ModelStorageType = "StorageClass"
	// ModelStorageTypeExistingClaim is a PersistentVolumeClaim the user owns
	// (modelStorage.existingClaim); the operator only mounts it.
	ModelStorageTypeExistingClaim ModelStorageType = "ExistingClaim"
	// ModelStorageTypeModelStorageClass is storage a cluster administrator published as a
	// ModelStorageClass (modelStorage.modelStorageClass).
	ModelStorageTypeModelStorageClass ModelStorageType = "ModelStorageClass"
)

// ModelStorage is the shared storage the steps load their models from: a union of the kinds
// of storage, type naming the one member that is set.
// +union
// +kubebuilder:validation:XValidation:rule="has(self.nfs) == (self.type == 'NFS')",message="modelStorage.nfs is set with modelStorage.type NFS, and only then: give nfs.server and nfs.path with type NFS, or remove nfs"
// +kubebuilder:validation:XValidation:rule="has(self.csi) == (self.type == 'CSI')",message="modelStorage.csi is set with modelStorage.type CSI, and only then: give csi.driver and csi.volumeAttributes with type CSI, or remove csi"
// +kubebuilder:validation:XValidation:rule="has(self.storageClass) == (self.type == 'StorageClass')",message="modelStorage.storageClass is set with modelStorage.type StorageClass, and only then: give storageClass.name with type StorageClass, or remove storageClass"
// +kubebuilder:validation:XValidation:rule="has(self.existingClaim) == (self.type == 'ExistingClaim')",message="modelStorage.existingClaim is set with modelStorage.type ExistingClaim, and only then: give existingClaim.name with type ExistingClaim, or remove existingClaim"
// +kubebuilder:validation:XValidation:rule="has(self.modelStorageClass) == (self.type == 'ModelStorageClass')",message="modelStorage.modelStorageClass is set with modelStorage.type ModelStorageClass, and only then: give modelStorageClass.name (kubectl get modelstorageclasses) with type ModelStorageClass, or remove modelStorageClass"
// +kubebuilder:validation:XValidation:rule="oldSelf.type != 'StorageClass' || (self.type == 'StorageClass' && has(self.storageClass) && has(oldSelf.storageClass) && self.storageClass == oldSelf.storageClass)",message="modelStorage of type StorageClass cannot change its type or storageClass (only mountPath): its claim holds the models and a new claim would start empty. To move the models: create a claim as you need it, copy the models into it, and point the Pipeline at it with modelStorage.type ExistingClaim and existingClaim.name"
type ModelStorage struct {
	// type names the kind of storage, and the one member below that describes it: NFS (nfs),
	// CSI (csi), StorageClass (storageClass), ExistingClaim (existingClaim) or
	// ModelStorageClass (modelStorageClass).
	// +required
	// +unionDiscriminator
	Type ModelStorageType `json:"type,omitempty"`

	// nfs is an NFS export; the operator creates a PersistentVolume and a claim bound to it.
	// +optional
	// +unionMember
	NFS *NFSStorage `json:"nfs,omitempty"` //nolint:kubeapilinter // optionalfields: a union member is a pointer, absent unless type names it (the CEL rules test has()).

	// csi is a volume a CSI driver mounts; the operator creates a PersistentVolume and a claim
	// bound to it.
	// +optional
	// +unionMember
	CSI *CSIStorage `json:"csi,omitempty"` //nolint:kubeapilinter // optionalfields: a union member is a pointer, absent unless type names it (the CEL rules test has()).

	// storageClass is a claim the operator creates and a StorageClass provisions.
	// +optional
	// +unionMember
	StorageClass *StorageClassStorage `json:"storageClass,omitempty"` //nolint:kubeapilinter // optionalfields: a union member is a pointer, absent unless type names it (the CEL rules test has()).

	// existingClaim is a claim the user owns, in the Pipeline's namespace; the operator mounts
	// it and never changes or deletes it.
	// +optional
	// +unionMember
	ExistingClaim *ExistingClaimStorage `json:"existingClaim,omitempty"` //nolint:kubeapilinter // optionalfields: a union member is a pointer, absent unless type names it (the CEL rules test has()).

	// modelStorageClass is storage a cluster administrator published as a ModelStorageClass;
	// the operator creates a PersistentVolume from it and a claim bound to it, when the class
	// selects the Pipeline's namespace.
	// +optional
	// +unionMember
	ModelStorageClass *ModelStorageClassStorage `json:"modelStorageClass,omitempty"` //nolint:kubeapilinter // optionalfields: a union member is a pointer, absent unless type names it (the CEL rules test has()).

	// mountPath is where every step finds the model storage.
	// +optional
	// +kubebuilder:default=/models
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	MountPath string `json:"mountPath,omitempty"`
}

// NFSStorage is an NFS export that holds the models.
type NFSStorage struct {
	// server is the NFS server: an IP address or a DNS name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Server string `json:"server,omitempty"`

	// path is the exported directory on the server.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="nfs.path must be an absolute path on the NFS server, starting with '/'"
	Path string `json:"path,omitempty"`

	// capacity is the size of the PersistentVolume and of the claim.
	// +optional
	// +kubebuilder:default="1Gi"
	Capacity *resource.Quantity `json:"capacity,omitempty"`

	// accessModes of the PersistentVolume and the claim.
	// +optional
	// +kubebuilder:default={ReadOnlyMany}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
}

// CSIStorage is a volume a CSI driver mounts.
type CSIStorage struct {
	// driver is the name of the CSI driver, e.g. nfs.csi.k8s.io.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="csi.driver must be a CSI driver name: a DNS name of at most 63 characters, e.g. nfs.csi.k8s.io"
	Driver string `json:"driver,omitempty"`

	// volumeAttributes are handed to the driver as the volume's attributes (for
	// nfs.csi.k8s.io, server and share).
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=31
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && size(self[k]) <= 4096)",message="csi.volumeAttributes keys must be at most 253 characters and values at most 4096"
	VolumeAttributes map[string]string `json:"volumeAttributes,omitempty"`

	// capacity is the size of the PersistentVolume and of the claim.
	// +optional
	// +kubebuilder:default="1Gi"
	Capacity *resource.Quantity `json:"capacity,omitempty"`

	// accessModes of the PersistentVolume and the claim.
	// +optional
	// +kubebuilder:default={ReadOnlyMany}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
}

// StorageClassStorage is a claim a StorageClass provisions.
type StorageClassStorage struct {
	// name is the StorageClass that provisions the claim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// capacity is the size of the claim.
	// +optional
	// +kubebuilder:default="1Gi"
	Capacity *resource.Quantity `json:"capacity,omitempty"`

	// accessModes of the claim.
	// +optional
	// +kubebuilder:default={ReadOnlyMany}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
}

// ExistingClaimStorage is a PersistentVolumeClaim the user owns.
type ExistingClaimStorage struct {
	// name is the claim, in the Pipeline's namespace, that holds the models.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// ModelStorageClassStorage is storage published as a ModelStorageClass.
type ModelStorageClassStorage struct {
	// name is the ModelStorageClass (kubectl get modelstorageclasses); it must select the
	// Pipeline's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// capacity is the size of the PersistentVolume and of the claim.
	// +optional
	// +kubebuilder:default="1Gi"
	Capacity *resource.Quantity `json:"capacity,omitempty"`

	// accessModes of the PersistentVolume and the claim.
	// +optional
	// +kubebuilder:default={ReadOnlyMany}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`
}

// DataPathMode says who passes a request from step to step.
// +kubebuilder:validation:Enum=Chain;Router
type DataPathMode string

const (
	// DataPathModeChain lets each step forward its answer to the next step itself, at
	// NEXT_STEP_URL; the first step is the entry.
	DataPathModeChain DataPathMode = "Chain"
	// DataPathModeRouter runs the pipeline router (a ConfigMap, a Deployment and a Service
	// named <pipeline>-router) as the entry: it calls the steps, each once the answers its
	// inputs name have arrived (the one before, without inputs), and passes them on. Every step's NEXT_STEP_URL is then empty: none forwards by itself.
	DataPathModeRouter DataPathMode = "Router"
)

// DataPath says how a request travels from step to step.
// +union
// +kubebuilder:validation:XValidation:rule="!has(self.router) || self.mode == 'Router'",message="dataPath.router configures the router, which runs only with dataPath.mode Router: set mode to Router, or remove router"
type DataPath struct {
	// mode is Chain (each step forwards to the next itself) or Router (the router calls the
	// steps, in order or as their inputs allow).
	// +optional
	// +unionDiscriminator
	// +kubebuilder:default=Chain
	Mode DataPathMode `json:"mode,omitempty"`

	// router configures the router of mode Router; without it the router runs with its
	// defaults.
	// +optional
	// +unionMember
	Router *Router `json:"router,omitempty"`
}

// HeaderName is the name of an HTTP header.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=128
// +kubebuilder:validation:Pattern=`^[-!#$%&'*+.^_|~0-9A-Za-z]+$`
type HeaderName string

// Router is the pipeline router: a Deployment of the router (shipped in the operator's image)
// that calls the steps (in order, or at the same time where their inputs do not wait for one
// another), passes each answer on to the steps that take it, retries, enforces per-step
// deadlines and exports per-step metrics.
// +kubebuilder:validation:XValidation:rule="!has(self.fallbackLocations) || size(self.fallbackLocations) == 0 || has(self.location)",message="router.fallbackLocations needs router.location: a router that is not pinned to a node has nothing to fail over from"
// +kubebuilder:validation:XValidation:rule="!has(self.fallbackLocations) || !has(self.location) || !(self.location in self.fallbackLocations)",message="router.fallbackLocations must not repeat router.location: list only the other nodes the router may move to"
type Router struct {
	// location is the name of the node the router must run on, resolved and pinned as a
	// step's location is. Without it the scheduler chooses.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Location string `json:"location,omitempty"`

	// fallbackLocations are the nodes the router moves to, in order of preference, when the
	// node it runs on has been not ready for spec.failover.afterSeconds, as a step's
	// fallbackLocations: its Deployment is pinned to the first ready node of [location,
	// fallbackLocations...], and returns as spec.failover.failback says. Requires location.
	// The router's Service, and so the pipeline's entry, stays as it is.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.all(n, self.exists_one(m, m == n))",message="router.fallbackLocations must not name a node twice"
	// +listType=atomic
	FallbackLocations []string `json:"fallbackLocations,omitempty"`

	// replicas is the number of router pods, spread over nodes when location is empty.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Replicas *int32 `json:"replicas,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1, so that unset and set convert one to one, without conversion data.

	// resources are the compute resources of the router's container.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.limits) || size(self.limits) <= 16) && (!has(self.requests) || size(self.requests) <= 16)",message="resources: at most 16 limits and 16 requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || size(self.claims) == 0",message="resources.claims is not supported: the operator declares no resource claims in the pod for the container to use"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// maxBodyBytes is the largest request body, and the largest step answer, the router
	// accepts (64 MiB when unset).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1073741824
	MaxBodyBytes *int64 `json:"maxBodyBytes,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1, so that unset and set convert one to one, without conversion data.

	// requestTimeoutSeconds is the deadline of a request through the whole pipeline, from its
	// body read to its answer, retries included. When unset: what every step may take, the sum
	// over the steps of timeoutSeconds × (retries + 1) plus the waits between retries. It also
	// bounds how long a router pod drains on shutdown (at most 10 minutes).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	RequestTimeoutSeconds *int32 `json:"requestTimeoutSeconds,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1, so that unset and set convert one to one, without conversion data.

	// propagateHeaders are request headers the router passes on to every step, besides
	// traceparent, tracestate, baggage and X-Request-Id, which it always passes on.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	PropagateHeaders []HeaderName `json:"propagateHeaders,omitempty"`

	// outputs make the pipeline's answer of tensors of the steps' answers, under the Open
	// Inference Protocol: {"model_name": <the Pipeline's name>, "outputs": [...]}, each tensor
	// under its name here, in this order, once every step has answered. Each step named must
	// have protocol OpenInferenceProtocol or OpenInferenceProtocolGRPC; the router checks every
	// tensor against the step's model metadata before it is ready (see docs/router.md). Without
	// outputs the answer is the last step's answer as it is. A step that answers a 4xx, or whose
	// stopWhen holds, still answers with its own answer.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Outputs []PipelineTensorOutput `json:"outputs,omitempty"`
}

// PipelineTensorOutput is one tensor of the pipeline's answer.
type PipelineTensorOutput struct {
	// name is the tensor's name in the pipeline's answer.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// step names the step whose answer has the tensor among its outputs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Step string `json:"step,omitempty"`

	// tensor is the tensor's name in that step's answer.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Tensor string `json:"tensor,omitempty"`
}

// ServiceType is the type of the Service in front of a Pipeline's entry.
// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
type ServiceType string

const (
	// ServiceTypeClusterIP makes the entry reachable inside the cluster only.
	ServiceTypeClusterIP ServiceType = "ClusterIP"
	// ServiceTypeNodePort also opens a port on every node.
	ServiceTypeNodePort ServiceType = "NodePort"
	// ServiceTypeLoadBalancer also asks the cluster's load balancer for an external address.
	ServiceTypeLoadBalancer ServiceType = "LoadBalancer"
)

// IngressPathType is how an Ingress path matches request paths.
// +kubebuilder:validation:Enum=Prefix;Exact
type IngressPathType string

const (
	// IngressPathTypePrefix matches the path and every path below it, element by element.
	IngressPathTypePrefix IngressPathType = "Prefix"
	// IngressPathTypeExact matches the path exactly.
	IngressPathTypeExact IngressPathType = "Exact"
)

// Expose says how the Pipeline's entry is reached from outside the cluster.
type Expose struct {
	// serviceType is the type of the entry's Service: ClusterIP, NodePort or LoadBalancer.
	// The other Services stay ClusterIP.
	// +optional
	// +kubebuilder:default=ClusterIP
	ServiceType ServiceType `json:"serviceType,omitempty"`

	// ingress makes an Ingress that routes to the entry's Service.
	// +optional
	Ingress *IngressExpose `json:"ingress,omitempty"`
}

// IngressExpose is an Ingress that routes HTTP(S) traffic to the entry's Service.
// +kubebuilder:validation:XValidation:rule="!has(self.tlsSecretName) || has(self.host)",message="ingress.tlsSecretName needs ingress.host: a TLS certificate is issued for a host name"
type IngressExpose struct {
	// host is the DNS name the Ingress answers for. Without it the Ingress accepts requests
	// for any host (its load balancer address is then the way in).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="ingress.host must be a DNS name (a DNS-1123 subdomain: lowercase letters, digits, '-' and '.'), such as infer.example.com"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9.]+$')",message="ingress.host must be a DNS name, not an IP address: leave host empty to accept requests for any address"
	Host string `json:"host,omitempty"`

	// path is the HTTP path routed to the entry.
	// +optional
	// +kubebuilder:default="/"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="ingress.path must start with '/'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('//|/[.][.]?(/|$)|%2[fF]')",message="ingress.path must not contain '//', '.' or '..' segments or an encoded '/' (%2F)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:space:]?#]')",message="ingress.path must not contain spaces, '?' or '#'"
	Path string `json:"path,omitempty"`

	// pathType is how path matches request paths: Prefix (path and everything below it) or
	// Exact.
	// +optional
	// +kubebuilder:default=Prefix
	PathType IngressPathType `json:"pathType,omitempty"`

	// className is the IngressClass that serves the Ingress. Without it the cluster's default
	// class serves it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ClassName string `json:"className,omitempty"`

	// tlsSecretName is the Secret, in the Pipeline's namespace, holding the TLS certificate
	// and key for host. Setting it serves the entry over HTTPS; it requires host.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	TLSSecretName string `json:"tlsSecretName,omitempty"`
}

// FailbackPolicy says whether a step that failed over returns to a more preferred node by itself.
// +kubebuilder:validation:Enum=Automatic;Manual
type FailbackPolicy string

const (
	// FailbackAutomatic moves a step back to its most preferred node once that node has been
	// ready for failbackAfterSeconds.
	FailbackAutomatic FailbackPolicy = "Automatic"
	// FailbackManual leaves a step where it failed over to until failover.failbackNow is true
	// (or the step fails over again).
	FailbackManual FailbackPolicy = "Manual"
)

// Failover says when the steps, and the router, that have fallbackLocations move between
// their nodes.
type Failover struct {
	// afterSeconds is how long the node a step runs on must have been not ready (its Ready
	// condition False or Unknown, or the node gone) before the step moves to the first ready
	// node of [location, fallbackLocations...].
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	AfterSeconds *int32 `json:"afterSeconds,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1, so that unset and set convert one to one, without conversion data.

	// failback is Automatic (a step returns to a more preferred node once that node has been
	// ready for failbackAfterSeconds) or Manual (it returns when failbackNow is set).
	// +optional
	// +kubebuilder:default=Automatic
	Failback FailbackPolicy `json:"failback,omitempty"`

	// failbackAfterSeconds is how long a more preferred node must have been ready before a step
	// returns to it (failback Automatic).
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	FailbackAfterSeconds *int32 `json:"failbackAfterSeconds,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer as in v1beta1, so that unset and set convert one to one, without conversion data.

	// failbackNow true, with failback Manual, returns every step on a fallback node at
	// once to the most preferred node of its list that is ready. It is a one-shot request:
	// once a pass has placed every step, the operator removes it. v1beta1 says this with the
	// annotation distri-infer.ndsl.cn/failback: "true".
	// +optional
	FailbackNow *bool `json:"failbackNow,omitempty"` //nolint:kubeapilinter // nobools: a one-shot request, as v1beta1's annotation "true"; the operator clears it.
}

// PipelinePhase is the summary of a Pipeline's state.
// +kubebuilder:validation:Enum=Creating;Running;Failed;Deleting
type PipelinePhase string

const (
	// PipelinePhaseCreating means the children exist or are being made but not every step is
	// available yet.
	PipelinePhaseCreating PipelinePhase = "Creating"
	// PipelinePhaseRunning means the storage is bound and every step is available.
	PipelinePhaseRunning PipelinePhase = "Running"
	// PipelinePhaseFailed means something needs attention; the Degraded condition says what.
	PipelinePhaseFailed PipelinePhase = "Failed"
	// PipelinePhaseDeleting means the Pipeline is being deleted and its children removed.
	PipelinePhaseDeleting PipelinePhase = "Deleting"
)

// DeploymentState is the state of a Deployment of a Pipeline (a step's, or the router's).
// +kubebuilder:validation:Enum=Pending;Progressing;Available;Failed
type DeploymentState string

const (
	// DeploymentStatePending means the Deployment does not exist yet.
	DeploymentStatePending DeploymentState = "Pending"
	// DeploymentStateProgressing means the Deployment is rolling out.
	DeploymentStateProgressing DeploymentState = "Progressing"
	// DeploymentStateAvailable means every replica of the current revision is available.
	DeploymentStateAvailable DeploymentState = "Available"
	// DeploymentStateFailed means the rollout exceeded its progress deadline or cannot create pods.
	DeploymentStateFailed DeploymentState = "Failed"
)

// ServiceState is the state of a step's Service.
// +kubebuilder:validation:Enum=Pending;Ready
type ServiceState string

const (
	// ServiceStatePending means the Service does not exist yet or has no cluster IP.
	ServiceStatePending ServiceState = "Pending"
	// ServiceStateReady means the Service exists and has its cluster IP.
	ServiceStateReady ServiceState = "Ready"
)

// IngressState is the state of a Pipeline's Ingress.
// +kubebuilder:validation:Enum=Pending;Ready
type IngressState string

const (
	// IngressStatePending means the Ingress does not exist yet or no ingress controller has
	// published an address for it.
	IngressStatePending IngressState = "Pending"
	// IngressStateReady means an ingress controller published the Ingress's address.
	IngressStateReady IngressState = "Ready"
)

// StepStatus is the observed state of one step.
type StepStatus struct {
	// name is the step's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`

	// deploymentName is the name of the step's Deployment, which is also its Service's.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	DeploymentName string `json:"deploymentName,omitempty"`

	// deploymentState is the state of the step's Deployment.
	// +optional
	DeploymentState DeploymentState `json:"deploymentState,omitempty"`

	// serviceState is the state of the step's Service.
	// +optional
	ServiceState ServiceState `json:"serviceState,omitempty"`

	// url is the in-cluster URL of the step's Service.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	URL string `json:"url,omitempty"`

	// replicas is the number of pods the step should have: spec replicas, or for an autoscaled
	// step the number its HorizontalPodAutoscaler asks for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of the step's pods that are ready.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`

	// node is the node the step is pinned to now: location, or the fallback location it failed
	// over to. Absent for a step without location.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Node string `json:"node,omitempty"`

	// nodeReady says whether node exists, reports Ready and accepts the step's pods (not
	// cordoned, no NoSchedule or NoExecute taint the step does not tolerate). Written whenever
	// node is set.
	// +optional
	NodeReady *bool `json:"nodeReady,omitempty"` //nolint:kubeapilinter // nobools: an observed fact, true or false, as in v1beta1's status.

	// autoscaling is the state of the step's HorizontalPodAutoscaler; absent unless the step
	// sets autoscaling.
	// +optional
	Autoscaling *StepAutoscalingStatus `json:"autoscaling,omitempty"`

	// state says whether the step serves: Ready once every pod it asks for is ready (its model
	// server reports the model loaded, when it declares a readiness probe), Loading while its
	// pods run but are not all ready, Pending before they run, Failed when they cannot become
	// ready (crash loop, image pull failure, progress deadline exceeded), Stopped when it asks
	// for no pods.
	// +optional
	State StepState `json:"state,omitempty"`

	// reason is why the step is in its state, in CamelCase (for example ModelLoading,
	// CrashLoopBackOff, Unschedulable).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`

	// message says, for a person, what the step waits for or what failed.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// loadingSince is, while the step is Loading, when the container that loads its model
	// started: how long the model has been loading is the time since. Absent in other states.
	// +optional
	LoadingSince *metav1.Time `json:"loadingSince,omitempty"`
}

// StepProtocol is what a step's server speaks.
// +kubebuilder:validation:Enum=HTTP;OpenInferenceProtocol;OpenInferenceProtocolGRPC
type StepProtocol string

const (
	// StepProtocolHTTP is any HTTP server, called at the root of its Service.
	StepProtocolHTTP StepProtocol = "HTTP"
	// StepProtocolOpenInference is the Open Inference Protocol's REST API (KServe v2).
	StepProtocolOpenInference StepProtocol = "OpenInferenceProtocol"
	// StepProtocolOpenInferenceGRPC is the Open Inference Protocol's gRPC service,
	// inference.GRPCInferenceService, over HTTP/2 without TLS.
	StepProtocolOpenInferenceGRPC StepProtocol = "OpenInferenceProtocolGRPC"
)

// StepState says whether a step serves.
// +kubebuilder:validation:Enum=Pending;Loading;Ready;Failed;Stopped
type StepState string

const (
	// StepStatePending means the step's pods do not run yet (not created, not scheduled, or
	// their images still being pulled).
	StepStatePending StepState = "Pending"
	// StepStateLoading means the step's pods run but not all are ready: a model server is
	// still loading its model.
	StepStateLoading StepState = "Loading"
	// StepStateReady means every pod the step asks for is ready.
	StepStateReady StepState = "Ready"
	// StepStateFailed means the step's pods cannot become ready without a person: a container
	// in a crash loop (a startup probe that never passes ends so too), an image that cannot be
	// pulled, or a rollout past its progress deadline.
	StepStateFailed StepState = "Failed"
	// StepStateStopped means the step asks for no pods (its model storage was withdrawn).
	StepStateStopped StepState = "Stopped"
)

// StepAutoscalingStatus is what the HorizontalPodAutoscaler of an autoscaled step reports.
type StepAutoscalingStatus struct {
	// minReplicas is the fewest pods the autoscaler keeps.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most pods the autoscaler starts.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`

	// currentReplicas is the number of pods the autoscaler last saw.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CurrentReplicas *int32 `json:"currentReplicas,omitempty"`

	// desiredReplicas is the number of pods the autoscaler last asked for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DesiredReplicas *int32 `json:"desiredReplicas,omitempty"`

	// scalingActive is false while the autoscaler cannot compute a pod count (no resource
	// metrics API, no request for the targeted resource): the step keeps its pods and the
	// Pipeline is not failed. Absent until the autoscaler has reported.
	// +optional
	ScalingActive *bool `json:"scalingActive,omitempty"` //nolint:kubeapilinter // nobools: the autoscaler's ScalingActive condition, true or false, as in v1beta1's status.

	// message is why the autoscaler is not scaling, when scalingActive is false.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// StorageStatus is the state of a Pipeline's model volume and claim.
// +kubebuilder:validation:MinProperties=1
type StorageStatus struct {
	// volumeName is the name of the model PersistentVolume (NFS, CSI and ModelStorageClass
	// storage).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	VolumeName string `json:"volumeName,omitempty"`

	// volumeState is the phase of the model PersistentVolume, copied from its status.
	// +optional
	VolumeState corev1.PersistentVolumePhase `json:"volumeState,omitempty"` //nolint:kubeapilinter // optionalfields: core's PersistentVolumePhase, copied as it is; absent until the volume exists.

	// claimName is the name of the claim every step mounts.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName,omitempty"`

	// claimState is the phase of the claim every step mounts, copied from its status.
	// +optional
	ClaimState corev1.PersistentVolumeClaimPhase `json:"claimState,omitempty"` //nolint:kubeapilinter // optionalfields: core's PersistentVolumeClaimPhase, copied as it is; absent until the claim exists.
}

// PipelineStatus is the observed state of a Pipeline, rebuilt from the cluster on every pass.
type PipelineStatus struct {
	// conditions are Available, Progressing, Degraded, Reconciled, Ready, Reconciling and
	// Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec the last pass acted on.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase summarises the Pipeline for people and the printer column: Creating, Running,
	// Failed or Deleting. Tools should read the conditions.
	// +optional
	Phase PipelinePhase `json:"phase,omitempty"` //nolint:kubeapilinter // nophase: kept as the Phase printer column v1beta1 users read; the conditions carry the state.

	// models lists the model of every step, in spec order.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	Models []string `json:"models,omitempty"`

	// readySteps is the number of available steps: a step is available when its Deployment is
	// Available and its Service has a cluster IP.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadySteps *int32 `json:"readySteps,omitempty"`

	// totalSteps is the number of steps.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TotalSteps *int32 `json:"totalSteps,omitempty"`

	// ready is readySteps and totalSteps as people read them, "2/3": the READY printer column.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=23
	Ready string `json:"ready,omitempty"`

	// modelNames is models joined by ", ": the MODELS printer column.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	ModelNames string `json:"modelNames,omitempty"`

	// operatorVersion is the release of the operator that wrote this status (what its
	// --version prints): after an upgrade, the Pipelines the new release has reconciled.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	OperatorVersion string `json:"operatorVersion,omitempty"`

	// url is where the entry is reached from outside the cluster, once known.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url,omitempty"`

	// nodePort is the port every node opens for the entry (NodePort and LoadBalancer
	// Services); absent when that Service opens none.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	NodePort int32 `json:"nodePort,omitempty"`

	// storage is the state of the model volume and claim.
	// +optional
	Storage StorageStatus `json:"storage,omitzero"` //nolint:kubeapilinter // nonpointerstructs: omitted while empty (omitzero); MinProperties keeps {} out of the status.

	// ingressState is the state of the Ingress of spec.expose.ingress; absent without one.
	// +optional
	IngressState IngressState `json:"ingressState,omitempty"`

	// routerState is the state of the router's Deployment; absent unless dataPath.mode is
	// Router.
	// +optional
	RouterState DeploymentState `json:"routerState,omitempty"`

	// routerNode is the node the router is pinned to now: dataPath.router.location, or the
	// fallback location it failed over to. Absent unless the router runs with a location.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	RouterNode string `json:"routerNode,omitempty"`

	// routerNodeReady says whether routerNode exists, reports Ready and accepts the router's
	// pods (not cordoned, no NoSchedule or NoExecute taint). Written whenever routerNode is
	// set.
	// +optional
	RouterNodeReady *bool `json:"routerNodeReady,omitempty"` //nolint:kubeapilinter // nobools: an observed fact, true or false, as in v1beta1's status.

	// steps holds the state of every step, in spec order.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	Steps []StepStatus `json:"steps,omitempty"`
}

// Pipeline is a multi-step ML inference pipeline: shared model storage and one Deployment and
// Service per step, each pinned to its node.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=pl;pls;dipl,categories=all;distri-infer
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Models",type=string,JSONPath=`.status.modelNames`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Pipeline",resources={{Deployment,v1},{Service,v1},{ConfigMap,v1},{Ingress,v1},{PersistentVolumeClaim,v1},{PersistentVolume,v1},{HorizontalPodAutoscaler,v2},{PodDisruptionBudget,v1}}
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be at most 63 characters of lowercase letters, digits and '-', starting with a letter: it names the pipeline's Services and labels"
type Pipeline struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired pipeline.
	// +required
	Spec PipelineSpec `json:"spec,omitzero"`

	// status is the observed state of the pipeline.
	// +optional
	Status PipelineStatus `json:"status,omitzero"` //nolint:kubeapilinter // optionalfields: the status subresource, omitted while empty (omitzero), as every Kubernetes object's.
}

// PipelineList is a list of Pipelines.
// +kubebuilder:object:root=true
type PipelineList struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`

	// items are the Pipelines.
	// +required
	Items []Pipeline `json:"items"`
}

// Hub marks v1 as the version the other versions of the Pipeline convert to and from.
func (*Pipeline) Hub() {}
