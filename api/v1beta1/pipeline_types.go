package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StorageType says where the models of a Pipeline live and how the operator provides them.
// +kubebuilder:validation:Enum=nfs;csi;storageClass;existingClaim;modelStorageClass
type StorageType string

const (
	// StorageTypeNFS is an NFS export (csiParameter.server and csiParameter.share) mounted
	// through an in-tree NFS PersistentVolume that the operator creates.
	StorageTypeNFS StorageType = "nfs"
	// StorageTypeCSI is a CSI PersistentVolume that the operator creates: the driver comes from
	// csiParameter.driver (default nfs.csi.k8s.io), the other entries are its volumeAttributes.
	StorageTypeCSI StorageType = "csi"
	// StorageTypeStorageClass is a claim that a StorageClass provisions dynamically.
	StorageTypeStorageClass StorageType = "storageClass"
	// StorageTypeExistingClaim is a PersistentVolumeClaim the user owns; the operator only mounts it.
	StorageTypeExistingClaim StorageType = "existingClaim"
	// StorageTypeModelStorageClass is the storage a cluster administrator published as the
	// ModelStorageClass modelStorageClassName: the operator creates a PersistentVolume from it,
	// as for nfs and csi, when the class selects the Pipeline's namespace.
	StorageTypeModelStorageClass StorageType = "modelStorageClass"
)

// DefaultCSIDriver is the CSI driver of type csi storage when csiParameter.driver is not set.
const DefaultCSIDriver = "nfs.csi.k8s.io"

// CSIDriverParameter is the csiParameter key naming the CSI driver of type csi storage.
const CSIDriverParameter = "driver"

// ListenPortArg is the step argument that sets the step's container port and Service port.
const ListenPortArg = "listenPort"

// ArgValue is the value of a step argument.
// +kubebuilder:validation:MaxLength=4096
type ArgValue string

// Step is one stage of a Pipeline: a container that loads one model, pinned to one node.
// +kubebuilder:validation:XValidation:rule="!has(self.port) || !has(self.args) || !('listenPort' in self.args) || self.args['listenPort'] == string(self.port)",message="port and args.listenPort disagree: set only one of them"
// +kubebuilder:validation:XValidation:rule="!has(self.fallbackLocations) || size(self.fallbackLocations) == 0 || has(self.location)",message="fallbackLocations needs location: a step that is not pinned to a node has nothing to fail over from"
// +kubebuilder:validation:XValidation:rule="!has(self.fallbackLocations) || !has(self.location) || !(self.location in self.fallbackLocations)",message="fallbackLocations must not repeat location: list only the other nodes the step may move to"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.replicas)",message="set replicas or autoscaling, not both: with autoscaling the HorizontalPodAutoscaler sets the number of pods between autoscaling.minReplicas and autoscaling.maxReplicas (remove replicas)"
type Step struct {
	// name identifies the step; it names the step's Deployment and Service
	// (<pipeline>-<name>). Defaults to step-<1-based position>.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Step Name",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	Name string `json:"name,omitempty"`

	// image is the container image of the step.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	Image string `json:"image"`

	// location is the name of the node the step must run on: its pods are pinned by node name
	// (a required node affinity on metadata.name). A location no node is named after names the
	// one node whose kubernetes.io/hostname label it is. Empty lets the scheduler choose.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Node",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	Location string `json:"location,omitempty"`

	// fallbackLocations are the nodes the step moves to, in order of preference, when the node
	// it runs on has been not ready for spec.failover.afterSeconds: its Deployment is pinned to
	// the first ready node of [location, fallbackLocations...]. Requires
	// location. Its Service and the other steps' NEXT_STEP_URL stay as they are.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.all(n, self.exists_one(m, m == n))",message="fallbackLocations must not name a node twice"
	// +listType=atomic
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Fallback Nodes",xDescriptors="urn:alm:descriptor:com.tectonic.ui:advanced"
	FallbackLocations []string `json:"fallbackLocations,omitempty"`

	// model is the model's directory inside the model storage; the step finds it at
	// MODEL_PATH (<mountPath>/<model>).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.]?(/|$)')",message="model must not contain '.' or '..' path segments"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Model",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	Model string `json:"model"`

	// args is the configuration handed to the step: each entry becomes an environment
	// variable of the same name. listenPort, when present, is also the container and
	// Service port.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 256)",message="args keys must be at most 256 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[!-<>-~]+$'))",message="args keys must be printable ASCII characters without spaces or '='"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['MODEL_NAME', 'MODEL_PATH', 'PIPELINE_NAME', 'STEP_NAME', 'STEP_INDEX', 'NEXT_STEP_URL']))",message="args must not set MODEL_NAME, MODEL_PATH, PIPELINE_NAME, STEP_NAME, STEP_INDEX or NEXT_STEP_URL: the operator sets them"
	// +kubebuilder:validation:XValidation:rule="!('listenPort' in self) || self['listenPort'].matches('^([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$')",message="args.listenPort must be a port number from 1 to 65535"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Arguments"
	Args map[string]ArgValue `json:"args,omitempty"`

	// replicas is the number of pods of the step. Defaults to 1 unless autoscaling is set,
	// which excludes it.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replicas",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	Replicas *int32 `json:"replicas,omitempty"`

	// autoscaling, when set, makes a HorizontalPodAutoscaler own the step's number of pods;
	// the operator then no longer sets the Deployment's replicas.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Autoscaling"
	Autoscaling *StepAutoscaling `json:"autoscaling,omitempty"`

	// port is the port the step's container listens on, and the port of its Service.
	// Defaults to args.listenPort, else 80.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Port",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	Port *int32 `json:"port,omitempty"`

	// resources are the compute resources of the step's container.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.limits) || size(self.limits) <= 16) && (!has(self.requests) || size(self.requests) <= 16)",message="resources: at most 16 limits and 16 requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || size(self.claims) == 0",message="resources.claims is not supported: the operator declares no resource claims in the pod for the container to use"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Resources",xDescriptors="urn:alm:descriptor:com.tectonic.ui:resourceRequirements"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// env are extra environment variables of the step's container, set after args.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(e, size(e.name) <= 256)",message="env names must be at most 256 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.value) || size(e.value) <= 32768)",message="env values must be at most 32768 characters (32 KiB): larger configuration belongs in the model storage"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || ((!has(e.valueFrom.configMapKeyRef) || (size(e.valueFrom.configMapKeyRef.key) <= 253 && (!has(e.valueFrom.configMapKeyRef.name) || size(e.valueFrom.configMapKeyRef.name) <= 253))) && (!has(e.valueFrom.secretKeyRef) || (size(e.valueFrom.secretKeyRef.key) <= 253 && (!has(e.valueFrom.secretKeyRef.name) || size(e.valueFrom.secretKeyRef.name) <= 253))) && (!has(e.valueFrom.fieldRef) || (size(e.valueFrom.fieldRef.fieldPath) <= 512 && (!has(e.valueFrom.fieldRef.apiVersion) || size(e.valueFrom.fieldRef.apiVersion) <= 253))) && (!has(e.valueFrom.resourceFieldRef) || (size(e.valueFrom.resourceFieldRef.resource) <= 253 && (!has(e.valueFrom.resourceFieldRef.containerName) || size(e.valueFrom.resourceFieldRef.containerName) <= 253))) && (!has(e.valueFrom.fileKeyRef) || (size(e.valueFrom.fileKeyRef.key) <= 253 && size(e.valueFrom.fileKeyRef.volumeName) <= 253 && size(e.valueFrom.fileKeyRef.path) <= 512))))",message="env valueFrom: names and keys must be at most 253 characters, fieldRef.fieldPath and fileKeyRef.path at most 512"
	// +listType=map
	// +listMapKey=name
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Environment Variables",xDescriptors="urn:alm:descriptor:com.tectonic.ui:advanced"
	Env []corev1.EnvVar `json:"env,omitempty"`

	// nodeSelector adds node labels the step's pods require, besides location.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && size(self[k]) <= 63)",message="nodeSelector keys must be at most 317 characters (a label key) and values at most 63 (a label value)"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Node Selector",xDescriptors="urn:alm:descriptor:com.tectonic.ui:advanced"
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the step's pods run on tainted nodes.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(t, (!has(t.key) || size(t.key) <= 317) && (!has(t.value) || size(t.value) <= 63) && (!has(t.operator) || size(t.operator) <= 16) && (!has(t.effect) || size(t.effect) <= 16))",message="tolerations: key must be at most 317 characters (a label key), value at most 63 (a label value), operator and effect at most 16"
	// +listType=atomic
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Tolerations",xDescriptors="urn:alm:descriptor:com.tectonic.ui:advanced"
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// securityContext is the security context of the step's container. When set it replaces
	// the operator's defaults (allowPrivilegeEscalation false; in a namespace that enforces the
	// restricted Pod Security level also runAsNonRoot true and every capability dropped); the
	// pod keeps its RuntimeDefault seccomp profile either way.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.capabilities) || ((!has(self.capabilities.add) || size(self.capabilities.add) <= 64) && (!has(self.capabilities.drop) || size(self.capabilities.drop) <= 64))",message="securityContext.capabilities: at most 64 capabilities to add and 64 to drop"
	// +kubebuilder:validation:XValidation:rule="(!has(self.seLinuxOptions) || ((!has(self.seLinuxOptions.user) || size(self.seLinuxOptions.user) <= 256) && (!has(self.seLinuxOptions.role) || size(self.seLinuxOptions.role) <= 256) && (!has(self.seLinuxOptions.type) || size(self.seLinuxOptions.type) <= 256) && (!has(self.seLinuxOptions.level) || size(self.seLinuxOptions.level) <= 256))) && (!has(self.procMount) || size(self.procMount) <= 16)",message="securityContext: seLinuxOptions fields must be at most 256 characters, procMount at most 16"
	// +kubebuilder:validation:XValidation:rule="(!has(self.seccompProfile) || (size(self.seccompProfile.type) <= 32 && (!has(self.seccompProfile.localhostProfile) || size(self.seccompProfile.localhostProfile) <= 4096))) && (!has(self.appArmorProfile) || (size(self.appArmorProfile.type) <= 32 && (!has(self.appArmorProfile.localhostProfile) || size(self.appArmorProfile.localhostProfile) <= 4096))) && (!has(self.windowsOptions) || ((!has(self.windowsOptions.gmsaCredentialSpecName) || size(self.windowsOptions.gmsaCredentialSpecName) <= 256) && (!has(self.windowsOptions.gmsaCredentialSpec) || size(self.windowsOptions.gmsaCredentialSpec) <= 65536) && (!has(self.windowsOptions.runAsUserName) || size(self.windowsOptions.runAsUserName) <= 256)))",message="securityContext: seccompProfile and appArmorProfile types must be at most 32 characters and localhost profiles at most 4096; windowsOptions names at most 256 and gmsaCredentialSpec at most 65536"
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`

	// timeoutSeconds is the router's deadline for one call to the step, in seconds (30 when
	// unset). Used only with spec.router.enabled.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Timeout Seconds",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number","urn:alm:descriptor:com.tectonic.ui:advanced"}
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`

	// retries is how many times the router calls the step again after a 5xx answer, a
	// connection error or a timeout (0 when unset). Used only with spec.router.enabled.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Retries",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number","urn:alm:descriptor:com.tectonic.ui:advanced"}
	Retries *int32 `json:"retries,omitempty"`

	// idempotent false says the step must not get the same request twice: the router then calls
	// it again only when the call could not be made at all (nothing was sent), never after a
	// timeout or an answer. True when unset. Used only with spec.router.enabled.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Idempotent",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch","urn:alm:descriptor:com.tectonic.ui:advanced"}
	Idempotent *bool `json:"idempotent,omitempty"`

	// stopWhen is a CEL expression over the step's response (response, status, headers): when
	// it is true the router ends the pipeline with this step's answer (see docs/router.md).
	// Used only with spec.router.enabled.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Stop Condition",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	StopWhen string `json:"stopWhen,omitempty"`
}

// Router is the pipeline's single entry: a Deployment of the pipeline router (shipped in the
// operator's image) that calls the steps in order, passes each answer on to the next step,
// retries, enforces per-step deadlines and exports per-step metrics.
// +kubebuilder:validation:XValidation:rule="!has(self.fallbackLocations) || size(self.fallbackLocations) == 0 || has(self.location)",message="router.fallbackLocations needs router.location: a router that is not pinned to a node has nothing to fail over from"
// +kubebuilder:validation:XValidation:rule="!has(self.fallbackLocations) || !has(self.location) || !(self.location in self.fallbackLocations)",message="router.fallbackLocations must not repeat router.location: list only the other nodes the router may move to"
type Router struct {
	// enabled makes the operator run the router: a ConfigMap, a Deployment and a Service
	// named <pipeline>-router. spec.expose then points at the router instead of the first step,
	// and every step's NEXT_STEP_URL is empty: the router calls the steps, none forwards.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Enabled",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	Enabled bool `json:"enabled,omitempty"`

	// location is the name of the node the router must run on, resolved and pinned as a
	// step's location is. Empty lets the scheduler choose.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Node",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	Location string `json:"location,omitempty"`

	// fallbackLocations are the nodes the router moves to, in order of preference, when the
	// node it runs on has been not ready for spec.failover.afterSeconds, as a step's
	// fallbackLocations: its Deployment is pinned to the first ready node of [location,
	// fallbackLocations...], and returns as spec.failover.failback says. Requires location.
	// The router's Service, and so the pipeline's entry, stays as it is.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self.all(n, self.exists_one(m, m == n))",message="router.fallbackLocations must not name a node twice"
	// +listType=atomic
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Fallback Nodes",xDescriptors="urn:alm:descriptor:com.tectonic.ui:advanced"
	FallbackLocations []string `json:"fallbackLocations,omitempty"`

	// replicas is the number of router pods, spread over nodes when location is empty.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Replicas",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	Replicas *int32 `json:"replicas,omitempty"`

	// resources are the compute resources of the router's container.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(!has(self.limits) || size(self.limits) <= 16) && (!has(self.requests) || size(self.requests) <= 16)",message="resources: at most 16 limits and 16 requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.claims) || size(self.claims) == 0",message="resources.claims is not supported: the operator declares no resource claims in the pod for the container to use"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Resources",xDescriptors="urn:alm:descriptor:com.tectonic.ui:resourceRequirements"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// maxBodyBytes is the largest request body, and the largest step answer, the router
	// accepts (64 MiB when unset).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1073741824
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Max Body Bytes",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number","urn:alm:descriptor:com.tectonic.ui:advanced"}
	MaxBodyBytes *int64 `json:"maxBodyBytes,omitempty"`

	// requestTimeoutSeconds is the deadline of a request through the whole pipeline, from its
	// body read to its answer, retries included. When unset: what every step may take, the sum
	// over the steps of timeoutSeconds × (retries + 1) plus the waits between retries. It also
	// bounds how long a router pod drains on shutdown (at most 10 minutes).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Request Timeout Seconds",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:number","urn:alm:descriptor:com.tectonic.ui:advanced"}
	RequestTimeoutSeconds *int32 `json:"requestTimeoutSeconds,omitempty"`

	// propagateHeaders are request headers the router passes on to every step, besides
	// traceparent, tracestate, baggage and X-Request-Id, which it always passes on (for
	// example X-User).
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router Propagated Headers",xDescriptors="urn:alm:descriptor:com.tectonic.ui:advanced"
	PropagateHeaders []HeaderName `json:"propagateHeaders,omitempty"`
}

// HeaderName is the name of an HTTP header.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=128
// +kubebuilder:validation:Pattern=`^[-!#$%&'*+.^_|~0-9A-Za-z]+$`
type HeaderName string

// ModelStorage is the shared storage the steps load their models from.
// +kubebuilder:validation:XValidation:rule="self.type != 'nfs' || (has(self.csiParameter) && 'server' in self.csiParameter && 'share' in self.csiParameter)",message="modelStorage of type nfs needs csiParameter.server and csiParameter.share"
// +kubebuilder:validation:XValidation:rule="self.type != 'nfs' || !has(self.csiParameter) || !('share' in self.csiParameter) || self.csiParameter.share.startsWith('/')",message="csiParameter.share must be an absolute path on the NFS server"
// +kubebuilder:validation:XValidation:rule="self.type != 'csi' || (has(self.csiParameter) && self.csiParameter.exists(k, k != 'driver'))",message="modelStorage of type csi needs the driver's volume attributes in csiParameter (and optionally csiParameter.driver)"
// +kubebuilder:validation:XValidation:rule="self.type != 'storageClass' || has(self.storageClassName)",message="modelStorage of type storageClass needs storageClassName"
// +kubebuilder:validation:XValidation:rule="self.type != 'existingClaim' || has(self.claimName)",message="modelStorage of type existingClaim needs claimName"
// +kubebuilder:validation:XValidation:rule="self.type != 'modelStorageClass' || has(self.modelStorageClassName)",message="modelStorage of type modelStorageClass needs modelStorageClassName: the name of a ModelStorageClass (kubectl get modelstorageclasses)"
// +kubebuilder:validation:XValidation:rule="self.type != 'modelStorageClass' || !has(self.csiParameter) || size(self.csiParameter) == 0",message="modelStorage of type modelStorageClass takes its source from the ModelStorageClass: remove csiParameter"
// +kubebuilder:validation:XValidation:rule="!has(self.modelStorageClassName) || self.type == 'modelStorageClass'",message="modelStorageClassName is only read by modelStorage.type modelStorageClass: set that type or remove modelStorageClassName"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.type) || oldSelf.type != 'storageClass' || (has(self.type) && self.type == 'storageClass' && has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName) && (has(self.capacity) ? self.capacity : '1Gi') == (has(oldSelf.capacity) ? oldSelf.capacity : '1Gi') && (has(self.accessModes) && size(self.accessModes) > 0 ? self.accessModes : ['ReadOnlyMany']) == (has(oldSelf.accessModes) && size(oldSelf.accessModes) > 0 ? oldSelf.accessModes : ['ReadOnlyMany']) && (has(self.csiParameter) ? self.csiParameter : {}) == (has(oldSelf.csiParameter) ? oldSelf.csiParameter : {}))",message="modelStorage of type storageClass cannot change its type, storageClassName, capacity, accessModes or csiParameter (only mountPath): its claim holds the models and a new claim would start empty. To move the models: create a claim as you need it, copy the models into it, and point a Pipeline at it with modelStorage.type existingClaim and claimName"
// +kubebuilder:validation:XValidation:rule="self.type != 'nfs' || !has(self.csiParameter) || ((!('server' in self.csiParameter) || size(self.csiParameter.server) <= 253) && (!('share' in self.csiParameter) || size(self.csiParameter.share) <= 1024))",message="csiParameter.server must be at most 253 characters and csiParameter.share at most 1024 (they are nfs.server and nfs.path)"
// +kubebuilder:validation:XValidation:rule="self.type != 'csi' || !has(self.csiParameter) || ('driver' in self.csiParameter ? size(self.csiParameter.driver) <= 63 : size(self.csiParameter) <= 31)",message="modelStorage of type csi takes a csiParameter.driver of at most 63 characters and at most 31 volume attributes besides it"
type ModelStorage struct {
	// type is how the model storage is provided: nfs, csi, storageClass, existingClaim or
	// modelStorageClass.
	// +optional
	// +kubebuilder:default=nfs
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage Type",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:nfs","urn:alm:descriptor:com.tectonic.ui:select:csi","urn:alm:descriptor:com.tectonic.ui:select:storageClass","urn:alm:descriptor:com.tectonic.ui:select:existingClaim","urn:alm:descriptor:com.tectonic.ui:select:modelStorageClass"}
	Type StorageType `json:"type,omitempty"`

	// csiParameter describes the volume. For nfs: server and share. For csi: driver
	// (default nfs.csi.k8s.io) and the driver's volume attributes (for nfs.csi.k8s.io,
	// server and share).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && size(self[k]) <= 4096)",message="csiParameter keys must be at most 253 characters and values at most 4096"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage Parameters"
	CSIParameter map[string]string `json:"csiParameter,omitempty"`

	// storageClassName is the StorageClass that provisions the claim (type storageClass).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage Class",xDescriptors="urn:alm:descriptor:io.kubernetes:StorageClass"
	StorageClassName string `json:"storageClassName,omitempty"`

	// claimName is the PersistentVolumeClaim, in the Pipeline's namespace, that holds the
	// models (type existingClaim). The operator mounts it and never changes or deletes it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Existing Claim",xDescriptors="urn:alm:descriptor:io.kubernetes:PersistentVolumeClaim"
	ClaimName string `json:"claimName,omitempty"`

	// modelStorageClassName is the ModelStorageClass, published by a cluster administrator,
	// that the operator makes the PersistentVolume from (type modelStorageClass). The class
	// must select the Pipeline's namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Model Storage Class",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	ModelStorageClassName string `json:"modelStorageClassName,omitempty"`

	// capacity is the size of the volume and of the claim. Defaults to 1Gi.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Capacity",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	Capacity *resource.Quantity `json:"capacity,omitempty"`

	// accessModes of the volume and the claim. Defaults to [ReadOnlyMany].
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Access Modes",xDescriptors="urn:alm:descriptor:com.tectonic.ui:advanced"
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`

	// mountPath is where every step finds the model storage.
	// +optional
	// +kubebuilder:default=/models
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Mount Path",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	MountPath string `json:"mountPath,omitempty"`
}

// ServiceType is the type of the Service in front of a Pipeline's entry (first) step.
// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
type ServiceType string

const (
	// ServiceTypeClusterIP makes the entry step reachable inside the cluster only.
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

// IngressExpose is an Ingress that routes HTTP(S) traffic to the entry step's Service.
// +kubebuilder:validation:XValidation:rule="!has(self.tlsSecretName) || has(self.host)",message="ingress.tlsSecretName needs ingress.host: a TLS certificate is issued for a host name"
type IngressExpose struct {
	// host is the DNS name the Ingress answers for. Empty accepts requests for any host
	// (then the Ingress's load balancer address is the way in).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="ingress.host must be a DNS name (a DNS-1123 subdomain: lowercase letters, digits, '-' and '.'), such as infer.example.com"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9.]+$')",message="ingress.host must be a DNS name, not an IP address: leave host empty to accept requests for any address"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Host",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	Host string `json:"host,omitempty"`

	// path is the HTTP path routed to the entry step. Defaults to "/".
	// +optional
	// +kubebuilder:default="/"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="ingress.path must start with '/'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('//|/[.][.]?(/|$)|%2[fF]')",message="ingress.path must not contain '//', '.' or '..' segments or an encoded '/' (%2F)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('[[:space:]?#]')",message="ingress.path must not contain spaces, '?' or '#'"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Path",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	Path string `json:"path,omitempty"`

	// pathType is how path matches request paths: Prefix (path and everything below it) or
	// Exact. Defaults to Prefix.
	// +optional
	// +kubebuilder:default=Prefix
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Path Type",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Prefix","urn:alm:descriptor:com.tectonic.ui:select:Exact"}
	PathType IngressPathType `json:"pathType,omitempty"`

	// className is the IngressClass that serves the Ingress. Empty uses the cluster's
	// default class.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Ingress Class",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	ClassName string `json:"className,omitempty"`

	// tlsSecretName is the Secret, in the Pipeline's namespace, holding the TLS certificate
	// and key for host. Setting it serves the entry step over HTTPS; it requires host.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="TLS Secret",xDescriptors="urn:alm:descriptor:io.kubernetes:Secret"
	TLSSecretName string `json:"tlsSecretName,omitempty"`
}

// Expose says how the Pipeline's entry (first) step is reached from outside the cluster.
type Expose struct {
	// serviceType is the type of the entry step's Service (the router's with spec.router
	// enabled): ClusterIP, NodePort or LoadBalancer. Defaults to ClusterIP. The other
	// Services stay ClusterIP.
	// +optional
	// +kubebuilder:default=ClusterIP
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Entry Service Type",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:ClusterIP","urn:alm:descriptor:com.tectonic.ui:select:NodePort","urn:alm:descriptor:com.tectonic.ui:select:LoadBalancer"}
	ServiceType ServiceType `json:"serviceType,omitempty"`

	// ingress, when set, makes an Ingress that routes to the entry step's Service (the
	// router's with spec.router enabled).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Ingress"
	Ingress *IngressExpose `json:"ingress,omitempty"`
}

// FailbackPolicy says whether a step that failed over returns to a more preferred node by itself.
// +kubebuilder:validation:Enum=Automatic;Manual
type FailbackPolicy string

const (
	// FailbackAutomatic moves a step back to its most preferred node once that node has been
	// ready for failbackAfterSeconds.
	FailbackAutomatic FailbackPolicy = "Automatic"
	// FailbackManual leaves a step where it failed over to until the Pipeline carries
	// FailbackAnnotation (or the step fails over again).
	FailbackManual FailbackPolicy = "Manual"
)

// Failover says when the steps, and the router, that have fallbackLocations move between
// their nodes.
type Failover struct {
	// afterSeconds is how long the node a step runs on must have been not ready (its Ready
	// condition False or Unknown, or the node gone) before the step moves to the first ready
	// node of [location, fallbackLocations...]. Defaults to 60.
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Failover After (seconds)",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	AfterSeconds *int32 `json:"afterSeconds,omitempty"`

	// failback is Automatic (a step returns to a more preferred node once that node has been
	// ready for failbackAfterSeconds) or Manual (it stays until the Pipeline is annotated
	// distri-infer.ndsl.cn/failback=true; the operator removes the annotation once it acted on
	// it). Defaults to Automatic.
	// +optional
	// +kubebuilder:default=Automatic
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Failback",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Automatic","urn:alm:descriptor:com.tectonic.ui:select:Manual"}
	Failback FailbackPolicy `json:"failback,omitempty"`

	// failbackAfterSeconds is how long a more preferred node must have been ready before a step
	// returns to it (failback Automatic). Defaults to 300.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Failback After (seconds)",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	FailbackAfterSeconds *int32 `json:"failbackAfterSeconds,omitempty"`
}

// PipelineSpec is the desired state of a Pipeline.
// +kubebuilder:validation:XValidation:rule="!has(self.router) || !has(self.router.enabled) || !self.router.enabled || self.steps.all(s, !has(s.name) || s.name != 'router')",message="a step named router would share the name <pipeline>-router with the router's Deployment and Service: rename the step, or disable spec.router"
type PipelineSpec struct {
	// steps are the stages of the pipeline, in order: each step's NEXT_STEP_URL is the
	// Service URL of the step after it (empty for the last step, and for all with the router).
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(s, !has(s.name) || self.exists_one(t, has(t.name) && t.name == s.name))",message="step names must be unique"
	// +kubebuilder:validation:XValidation:rule="self.all(s, !has(s.name) || !s.name.matches('^step-[1-9][0-9]?$') || int(s.name.substring(5)) > size(self) || has(self[int(s.name.substring(5)) - 1].name))",message="a step named step-<n> takes the name of the unnamed step at position n: name that step too, or choose another name"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Steps"
	Steps []Step `json:"steps"`

	// modelStorage is the shared storage every step mounts read-only. Of type storageClass it
	// cannot change once created, but for mountPath: its claim holds the models.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Model Storage"
	ModelStorage ModelStorage `json:"modelStorage"`

	// expose says how the entry (first) step is reached from outside the cluster. Without
	// it every step has a ClusterIP Service only.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Expose"
	Expose *Expose `json:"expose,omitempty"`

	// router, when enabled, runs the pipeline router in front of the steps.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Router"
	Router *Router `json:"router,omitempty"`

	// failover says when steps, and the router, with fallbackLocations move to another node
	// and back. Without it the defaults apply (afterSeconds 60, failback Automatic,
	// failbackAfterSeconds 300).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Failover"
	Failover *Failover `json:"failover,omitempty"`
}

// PipelinePhase is the summary of a Pipeline's state.
// +kubebuilder:validation:Enum=creating;running;failed;deleting
type PipelinePhase string

const (
	// PipelinePhaseCreating means the children exist or are being made but not every step is available yet.
	PipelinePhaseCreating PipelinePhase = "creating"
	// PipelinePhaseRunning means the storage is bound and every step is available.
	PipelinePhaseRunning PipelinePhase = "running"
	// PipelinePhaseFailed means something needs attention; the Degraded condition says what.
	PipelinePhaseFailed PipelinePhase = "failed"
	// PipelinePhaseDeleting means the Pipeline is being deleted and its children removed.
	PipelinePhaseDeleting PipelinePhase = "deleting"
)

// DeploymentPhase is the state of a step's Deployment.
// +kubebuilder:validation:Enum=Pending;Progressing;Available;Failed
type DeploymentPhase string

const (
	// DeploymentPhasePending means the Deployment does not exist yet.
	DeploymentPhasePending DeploymentPhase = "Pending"
	// DeploymentPhaseProgressing means the Deployment is rolling out.
	DeploymentPhaseProgressing DeploymentPhase = "Progressing"
	// DeploymentPhaseAvailable means every replica of the current revision is available.
	DeploymentPhaseAvailable DeploymentPhase = "Available"
	// DeploymentPhaseFailed means the rollout exceeded its progress deadline or cannot create pods.
	DeploymentPhaseFailed DeploymentPhase = "Failed"
)

// ServicePhase is the state of a step's Service.
// +kubebuilder:validation:Enum=Pending;Ready
type ServicePhase string

const (
	// ServicePhasePending means the Service does not exist yet or has no cluster IP.
	ServicePhasePending ServicePhase = "Pending"
	// ServicePhaseReady means the Service exists and has its cluster IP.
	ServicePhaseReady ServicePhase = "Ready"
)

// IngressPhase is the state of a Pipeline's Ingress.
// +kubebuilder:validation:Enum=Pending;Ready
type IngressPhase string

const (
	// IngressPhasePending means the Ingress does not exist yet or no ingress controller has
	// published an address for it.
	IngressPhasePending IngressPhase = "Pending"
	// IngressPhaseReady means an ingress controller published the Ingress's address.
	IngressPhaseReady IngressPhase = "Ready"
)

// StepStatus is the observed state of one step.
type StepStatus struct {
	// name is the step's name (step-<index> when the step is unnamed).
	// +required
	// +kubebuilder:validation:MaxLength=63
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Step Name",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	Name string `json:"name"`

	// deploymentName is the name of the step's Deployment.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Deployment",xDescriptors="urn:alm:descriptor:io.kubernetes:Deployment"
	DeploymentName string `json:"deploymentName,omitempty"`

	// deploymentPhase is the state of the step's Deployment.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Deployment Phase",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	DeploymentPhase DeploymentPhase `json:"deploymentPhase,omitempty"`

	// servicePhase is the state of the step's Service.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Service Phase",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	ServicePhase ServicePhase `json:"servicePhase,omitempty"`

	// url is the in-cluster URL of the step's Service.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="URL",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	URL string `json:"url,omitempty"`

	// replicas is the number of pods the step should have: spec replicas, or for an autoscaled
	// step the number its HorizontalPodAutoscaler asks for (the Deployment's until it has
	// reported).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Replicas",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	Replicas int32 `json:"replicas"`

	// readyReplicas is the number of the step's pods that are ready.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready Replicas",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	ReadyReplicas int32 `json:"readyReplicas"`

	// node is the node the step is pinned to now: location, or the fallback location it failed
	// over to. Empty for a step without location.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Node",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	Node string `json:"node,omitempty"`

	// nodeReady says whether node exists, reports Ready and accepts the step's pods (not
	// cordoned, no NoSchedule or NoExecute taint the step does not tolerate). Written whenever
	// node is set, false included; absent for a step without location.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Node Ready",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	NodeReady *bool `json:"nodeReady,omitempty"`

	// autoscaling is the state of the step's HorizontalPodAutoscaler; absent unless the step
	// sets autoscaling.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Autoscaling"
	Autoscaling *StepAutoscalingStatus `json:"autoscaling,omitempty"`
}

// DetailPhase is the state of every child of a Pipeline.
type DetailPhase struct {
	// pvPhase is the phase of the model PersistentVolume (nfs and csi storage).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Volume Phase",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	PVPhase corev1.PersistentVolumePhase `json:"pvPhase,omitempty"`

	// pvcPhase is the phase of the model PersistentVolumeClaim.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Claim Phase",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	PVCPhase corev1.PersistentVolumeClaimPhase `json:"pvcPhase,omitempty"`

	// ingressPhase is the state of the Ingress of spec.expose.ingress; empty without one.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ingress Phase",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	IngressPhase IngressPhase `json:"ingressPhase,omitempty"`

	// routerPhase is the state of the router's Deployment; empty when spec.router is not
	// enabled.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Router Phase",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	RouterPhase DeploymentPhase `json:"routerPhase,omitempty"`

	// routerNode is the node the router is pinned to now: spec.router.location, or the
	// fallback location it failed over to. Empty when the router is not enabled or has no
	// location.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Router Node",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	RouterNode string `json:"routerNode,omitempty"`

	// routerNodeReady says whether routerNode exists, reports Ready and accepts the router's
	// pods (not cordoned, no NoSchedule or NoExecute taint). Written whenever routerNode is
	// set, false included.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Router Node Ready",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	RouterNodeReady *bool `json:"routerNodeReady,omitempty"`

	// stepsPhase holds one entry per step, in spec order.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Steps"
	StepsPhase []StepStatus `json:"stepsPhase,omitempty"`
}

// PipelineStatus is the observed state of a Pipeline, rebuilt from the cluster on every pass.
type PipelineStatus struct {
	// phase summarises the Pipeline: creating, running, failed or deleting.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase",xDescriptors="urn:alm:descriptor:io.kubernetes.phase"
	Phase PipelinePhase `json:"phase,omitempty"`

	// detailPhase is the state of the storage and of every step.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Detail Phase"
	DetailPhase DetailPhase `json:"detailPhase,omitzero"`

	// models lists the model of every step, in order, comma-separated.
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Models",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	Models string `json:"models,omitempty"`

	// readySteps is "<available steps>/<steps>".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready Steps",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	ReadySteps string `json:"readySteps,omitempty"`

	// url is where the entry step (the router with spec.router enabled) is reached from
	// outside the cluster, once known: the Ingress's host (or its load balancer address) and
	// path, else the load balancer address and port of a LoadBalancer Service. Empty until an
	// address exists.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="URL",xDescriptors="urn:alm:descriptor:org.w3:link"
	URL string `json:"url,omitempty"`

	// nodePort is the port every node opens for the entry step, or for the router (NodePort
	// and LoadBalancer Services); absent when that Service opens none (0 is not a port).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Node Port",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	NodePort int32 `json:"nodePort,omitempty"`

	// pvName is the name of the model PersistentVolume (nfs and csi storage).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Volume",xDescriptors="urn:alm:descriptor:io.kubernetes:PersistentVolume"
	PVName string `json:"pvName,omitempty"`

	// pvcName is the name of the claim every step mounts.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Claim",xDescriptors="urn:alm:descriptor:io.kubernetes:PersistentVolumeClaim"
	PVCName string `json:"pvcName,omitempty"`

	// observedGeneration is the generation of the spec the last successful pass applied.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Observed Generation",xDescriptors="urn:alm:descriptor:com.tectonic.ui:text"
	ObservedGeneration int64 `json:"observedGeneration"`

	// conditions are Available, Progressing, Degraded and Reconciled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Pipeline is a multi-step ML inference pipeline: shared model storage and one
// Deployment and Service per step, each pinned to its node.
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:deprecatedversion:warning="distri-infer.ndsl.cn/v1beta1 Pipeline is deprecated: use distri-infer.ndsl.cn/v1, which reads and writes the same Pipelines (see docs/migration.md)"
// +kubebuilder:resource:shortName=pl;pls;dipl,categories=all;distri-infer
// +kubebuilder:printcolumn:name="Models",type=string,JSONPath=`.status.models`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.readySteps`
// +kubebuilder:printcolumn:name="Detail",type=string,JSONPath=`.status.detailPhase`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be at most 63 characters of lowercase letters, digits and '-', starting with a letter: it names the pipeline's Services and labels"
// +operator-sdk:csv:customresourcedefinitions:displayName="Pipeline",resources={{Deployment,v1},{Service,v1},{ConfigMap,v1},{Ingress,v1},{PersistentVolumeClaim,v1},{PersistentVolume,v1},{HorizontalPodAutoscaler,v2},{PodDisruptionBudget,v1}}
type Pipeline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired pipeline.
	// +required
	Spec PipelineSpec `json:"spec"`

	// status is the observed state of the pipeline.
	// +optional
	Status PipelineStatus `json:"status,omitzero"`
}

// PipelineList is a list of Pipelines.
// +kubebuilder:object:root=true
type PipelineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Pipeline `json:"items"`
}
