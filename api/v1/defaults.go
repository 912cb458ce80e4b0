package v1

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Values used where a Pipeline leaves a field out. The CRD and the defaulting webhook write them
// into the spec; the operator applies the same values when a Pipeline was stored without them.
const (
	// DefaultMountPath is where every step finds the model storage.
	DefaultMountPath = "/models"
	// DefaultPort is the port of a step that sets none.
	DefaultPort int32 = 80
	// DefaultReplicas is the number of pods of a step.
	DefaultReplicas int32 = 1
	// DefaultCapacity is the size of the model volume and claim.
	DefaultCapacity = "1Gi"
	// DefaultFailoverAfterSeconds is how long a step's node must be not ready before it moves.
	DefaultFailoverAfterSeconds int32 = 60
	// DefaultFailback is the failback policy.
	DefaultFailback = FailbackAutomatic
	// DefaultFailbackAfterSeconds is how long a more preferred node must be ready before a step
	// returns to it.
	DefaultFailbackAfterSeconds int32 = 300
	// DefaultAccessMode is the access mode of the model volume and claim: every step mounts it
	// read-only, from any node.
	DefaultAccessMode = corev1.ReadOnlyMany
	// DefaultRouterReplicas is the number of router pods: two, so that the pipeline's entry
	// outlives one pod or one node.
	DefaultRouterReplicas int32 = 2
	// DefaultTargetCPUUtilizationPercentage is the CPU target of an autoscaled step that sets
	// neither targetCPUUtilizationPercentage nor targetMemoryUtilizationPercentage, the target a
	// HorizontalPodAutoscaler uses by default.
	DefaultTargetCPUUtilizationPercentage int32 = 80
	// DefaultMinReplicas is the fewest pods of an autoscaled step.
	DefaultMinReplicas int32 = 1
)

// Environment variables the operator sets in every step's container.
const (
	EnvModelName    = "MODEL_NAME"
	EnvModelPath    = "MODEL_PATH"
	EnvPipelineName = "PIPELINE_NAME"
	EnvStepName     = "STEP_NAME"
	EnvStepIndex    = "STEP_INDEX"
	EnvNextStepURL  = "NEXT_STEP_URL"
)

// InjectedEnv are the environment variables the operator sets in every step's container.
var InjectedEnv = []string{EnvModelName, EnvModelPath, EnvPipelineName, EnvStepName, EnvStepIndex, EnvNextStepURL}

// ListenPortEnv is the environment variable whose value a step's port follows when only it
// changes (see the defaulting webhook): v1beta1's args.listenPort.
const ListenPortEnv = "listenPort"

// DefaultCSIDriver is the CSI driver of v1beta1's csi storage when it names none.
const DefaultCSIDriver = "nfs.csi.k8s.io"

// RouterEnabled reports whether the router calls the steps (dataPath.mode Router).
func (s *PipelineSpec) RouterEnabled() bool {
	return s.DataPath != nil && s.DataPath.Mode == DataPathModeRouter
}

// RouterSettings are the router's settings; nil when the spec gives none (the defaults apply)
// or runs no router.
func (s *PipelineSpec) RouterSettings() *Router {
	if !s.RouterEnabled() {
		return nil
	}
	return s.DataPath.Router
}

// IsPaused reports whether p asks the operator to leave its children alone: spec.paused true,
// or the annotation PausedAnnotation "true" written on the v1 object itself (v1beta1's way,
// which older instructions gave for v1 too).
func (p *Pipeline) IsPaused() bool {
	return (p.Spec.Paused != nil && *p.Spec.Paused) || p.Annotations[PausedAnnotation] == "true"
}

// FailbackRequested reports whether p asks for a manual failback: spec.failover.failbackNow
// true, or the annotation FailbackAnnotation "true" written on the v1 object itself.
func (p *Pipeline) FailbackRequested() bool {
	f := p.Spec.Failover
	return (f != nil && f.FailbackNow != nil && *f.FailbackNow) || p.Annotations[FailbackAnnotation] == "true"
}

// EffectiveReplicas is the number of router pods; r may be nil (the defaults).
func (r *Router) EffectiveReplicas() int32 {
	if r != nil && r.Replicas != nil {
		return *r.Replicas
	}
	return DefaultRouterReplicas
}

// Locations are the nodes router r may run on, most preferred first: location, then
// fallbackLocations. Empty for a router without location, and for no settings (r nil).
func (r *Router) Locations() []string {
	if r == nil || r.Location == "" {
		return nil
	}
	return append([]string{r.Location}, r.FallbackLocations...)
}

// EffectivePort is the port the step listens on: port, else 80.
func (s *Step) EffectivePort() int32 {
	if s.Port != nil {
		return *s.Port
	}
	return DefaultPort
}

// OpenInference reports whether the protocol is the Open Inference Protocol, over REST
// (OpenInferenceProtocol) or gRPC (OpenInferenceProtocolGRPC): the answer has output tensors and
// the model has metadata.
func (p StepProtocol) OpenInference() bool {
	return p == StepProtocolOpenInference || p == StepProtocolOpenInferenceGRPC
}

// EffectiveReplicas is the number of pods of the step.
func (s *Step) EffectiveReplicas() int32 {
	if s.Replicas != nil {
		return *s.Replicas
	}
	return DefaultReplicas
}

// Locations are the nodes step s may run on, most preferred first: location, then
// fallbackLocations. Empty for a step without location.
func (s *Step) Locations() []string {
	if s.Location == "" {
		return nil
	}
	return append([]string{s.Location}, s.FallbackLocations...)
}

// EffectiveMinReplicas is the fewest pods of the autoscaled step.
func (a *StepAutoscaling) EffectiveMinReplicas() int32 {
	if a.MinReplicas != nil {
		return *a.MinReplicas
	}
	return DefaultMinReplicas
}

// EffectiveTargetCPU is the CPU target in percent, 0 for none: the one set, else 80 when no
// memory target is set either.
func (a *StepAutoscaling) EffectiveTargetCPU() int32 {
	if a.TargetCPUUtilizationPercentage != nil {
		return *a.TargetCPUUtilizationPercentage
	}
	if a.TargetMemoryUtilizationPercentage == nil {
		return DefaultTargetCPUUtilizationPercentage
	}
	return 0
}

// storageSize is the capacity and access modes a member of the storage union sets.
func (m *ModelStorage) storageSize() (*resource.Quantity, []corev1.PersistentVolumeAccessMode) {
	switch {
	case m.NFS != nil:
		return m.NFS.Capacity, m.NFS.AccessModes
	case m.CSI != nil:
		return m.CSI.Capacity, m.CSI.AccessModes
	case m.StorageClass != nil:
		return m.StorageClass.Capacity, m.StorageClass.AccessModes
	case m.ModelStorageClass != nil:
		return m.ModelStorageClass.Capacity, m.ModelStorageClass.AccessModes
	}
	return nil, nil
}

// EffectiveCapacity is the size of the volume and the claim.
func (m *ModelStorage) EffectiveCapacity() resource.Quantity {
	if c, _ := m.storageSize(); c != nil {
		return *c
	}
	return resource.MustParse(DefaultCapacity)
}

// EffectiveAccessModes are the access modes of the volume and the claim.
func (m *ModelStorage) EffectiveAccessModes() []corev1.PersistentVolumeAccessMode {
	if _, modes := m.storageSize(); len(modes) > 0 {
		return modes
	}
	return []corev1.PersistentVolumeAccessMode{DefaultAccessMode}
}

// EffectiveMountPath is where every step finds the model storage.
func (m *ModelStorage) EffectiveMountPath() string {
	if m.MountPath != "" {
		return m.MountPath
	}
	return DefaultMountPath
}

// EffectiveAfterSeconds is how long a step's node must be not ready before the step moves.
func (f *Failover) EffectiveAfterSeconds() int32 {
	if f != nil && f.AfterSeconds != nil {
		return *f.AfterSeconds
	}
	return DefaultFailoverAfterSeconds
}

// EffectiveFailback is the failback policy.
func (f *Failover) EffectiveFailback() FailbackPolicy {
	if f != nil && f.Failback != "" {
		return f.Failback
	}
	return DefaultFailback
}

// EffectiveFailbackAfterSeconds is how long a more preferred node must be ready before a step
// returns to it.
func (f *Failover) EffectiveFailbackAfterSeconds() int32 {
	if f != nil && f.FailbackAfterSeconds != nil {
		return *f.FailbackAfterSeconds
	}
	return DefaultFailbackAfterSeconds
}

// LeadingEnv are the names of the env entries of step i that a v1beta1 client wrote as args,
// which v1beta1 placed before the variables the operator sets: the operator keeps them there,
// so that a step's pods do not change for a Pipeline made in v1beta1. They are read from the
// conversion data (ConversionDataAnnotation) the v1beta1 conversion keeps; none without it.
func (p *Pipeline) LeadingEnv(i int) []string {
	data, ok := p.Annotations[ConversionDataAnnotation]
	if !ok {
		return nil
	}
	var kept struct {
		Steps map[string]struct {
			Args []string `json:"args"`
		} `json:"steps"`
	}
	if json.Unmarshal([]byte(data), &kept) != nil {
		return nil
	}
	return kept.Steps[strconv.Itoa(i)].Args
}

// DefaultStepName is the name of the unnamed step at index i: step-<1-based index>.
func DefaultStepName(i int) string {
	return "step-" + strconv.Itoa(i+1)
}

// Default writes every default into the spec that the CRD schema cannot, so that the stored
// Pipeline shows what the operator will do: the name of an unnamed step (step-<position>, unless
// another step has that name: validation then names the conflict), the replicas of a step that
// is not autoscaled, the
// minReplicas and CPU target of one that is, the router's replicas, the failover settings and
// the size of the storage the operator creates. It never changes a value the user set, with one
// exception: an autoscaled step loses replicas 1, the default this function stored before the
// step was autoscaled (see defaultAutoscaling).
func (p *Pipeline) Default() {
	spec := &p.Spec
	named := map[string]bool{}
	for _, s := range spec.Steps {
		named[s.Name] = true
	}
	for i := range spec.Steps {
		s := &spec.Steps[i]
		if s.Name == "" && !named[DefaultStepName(i)] {
			s.Name = DefaultStepName(i)
		}
		if s.Autoscaling != nil {
			defaultAutoscaling(s)
		} else if s.Replicas == nil {
			r := s.EffectiveReplicas()
			s.Replicas = &r
		}
		if s.Port == nil {
			port := s.EffectivePort()
			s.Port = &port
		}
	}
	if spec.RouterEnabled() {
		if spec.DataPath.Router == nil {
			spec.DataPath.Router = &Router{}
		}
		if rt := spec.DataPath.Router; rt.Replicas == nil {
			r := rt.EffectiveReplicas()
			rt.Replicas = &r
		}
	}
	if f := spec.Failover; f != nil {
		after, back, backAfter := f.EffectiveAfterSeconds(), f.EffectiveFailback(), f.EffectiveFailbackAfterSeconds()
		f.AfterSeconds, f.Failback, f.FailbackAfterSeconds = &after, back, &backAfter
	}
	m := &spec.ModelStorage
	m.MountPath = m.EffectiveMountPath()
	capacity, modes := m.EffectiveCapacity(), m.EffectiveAccessModes()
	switch {
	case m.NFS != nil:
		m.NFS.Capacity, m.NFS.AccessModes = orDefault(m.NFS.Capacity, capacity), orDefaultModes(m.NFS.AccessModes, modes)
	case m.CSI != nil:
		m.CSI.Capacity, m.CSI.AccessModes = orDefault(m.CSI.Capacity, capacity), orDefaultModes(m.CSI.AccessModes, modes)
	case m.StorageClass != nil:
		m.StorageClass.Capacity, m.StorageClass.AccessModes = orDefault(m.StorageClass.Capacity, capacity), orDefaultModes(m.StorageClass.AccessModes, modes)
	case m.ModelStorageClass != nil:
		m.ModelStorageClass.Capacity, m.ModelStorageClass.AccessModes = orDefault(m.ModelStorageClass.Capacity, capacity), orDefaultModes(m.ModelStorageClass.AccessModes, modes)
	}
}

func orDefault(q *resource.Quantity, d resource.Quantity) *resource.Quantity {
	if q != nil {
		return q
	}
	return &d
}

func orDefaultModes(m, d []corev1.PersistentVolumeAccessMode) []corev1.PersistentVolumeAccessMode {
	if len(m) > 0 {
		return m
	}
	return d
}

// defaultAutoscaling writes the defaults of an autoscaled step: minReplicas, and the CPU
// target when no target is set. replicas and autoscaling exclude each other, but every step
// of a Pipeline stored before it was autoscaled carries replicas 1, written by Default; that
// value is removed, so that adding autoscaling to a Pipeline is not refused for a default the
// user never wrote. Any other replicas stays, and validation refuses it.
func defaultAutoscaling(s *Step) {
	a := s.Autoscaling
	if s.Replicas != nil && *s.Replicas == DefaultReplicas {
		s.Replicas = nil
	}
	if a.MinReplicas == nil {
		m := a.EffectiveMinReplicas()
		a.MinReplicas = &m
	}
	if a.TargetCPUUtilizationPercentage == nil && a.TargetMemoryUtilizationPercentage == nil {
		t := a.EffectiveTargetCPU()
		a.TargetCPUUtilizationPercentage = &t
	}
}
