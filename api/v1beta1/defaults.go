package v1beta1

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Values used where a Pipeline leaves a field out. The defaulting webhook writes them into the
// spec; the operator applies the same values when a Pipeline was stored without the webhook.
const (
	// DefaultMountPath is where every step finds the model storage.
	DefaultMountPath = "/models"
	// DefaultPort is the port of a step that sets neither port nor args.listenPort.
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
)

// RouterEnabled reports whether the spec asks for the router.
func (s *PipelineSpec) RouterEnabled() bool {
	return s.Router != nil && s.Router.Enabled
}

// EffectiveReplicas is the number of router pods.
func (r *Router) EffectiveReplicas() int32 {
	if r.Replicas != nil {
		return *r.Replicas
	}
	return DefaultRouterReplicas
}

// DefaultStepName is the name of the unnamed step at index i: step-<1-based index>.
func DefaultStepName(i int) string {
	return fmt.Sprintf("step-%d", i+1)
}

// StepName is the name of the step at index i, step-<1-based index> when it has none.
func (s *PipelineSpec) StepName(i int) string {
	if n := s.Steps[i].Name; n != "" {
		return n
	}
	return DefaultStepName(i)
}

// EffectivePort is the port the step listens on: port, else args.listenPort, else 80.
func (s *Step) EffectivePort() int32 {
	if s.Port != nil {
		return *s.Port
	}
	if v, ok := s.Args[ListenPortArg]; ok {
		if n, err := strconv.ParseInt(string(v), 10, 32); err == nil && n > 0 && n <= 65535 {
			return int32(n)
		}
	}
	return DefaultPort
}

// EffectiveReplicas is the number of pods of the step.
func (s *Step) EffectiveReplicas() int32 {
	if s.Replicas != nil {
		return *s.Replicas
	}
	return DefaultReplicas
}

// EffectiveType is the storage type, nfs when unset.
func (m *ModelStorage) EffectiveType() StorageType {
	if m.Type != "" {
		return m.Type
	}
	return StorageTypeNFS
}

// EffectiveCapacity is the size of the volume and the claim.
func (m *ModelStorage) EffectiveCapacity() resource.Quantity {
	if m.Capacity != nil {
		return *m.Capacity
	}
	return resource.MustParse(DefaultCapacity)
}

// EffectiveAccessModes are the access modes of the volume and the claim.
func (m *ModelStorage) EffectiveAccessModes() []corev1.PersistentVolumeAccessMode {
	if len(m.AccessModes) > 0 {
		return m.AccessModes
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

// Locations are the nodes step s may run on, most preferred first: location, then
// fallbackLocations. Empty for a step without location.
func (s *Step) Locations() []string {
	if s.Location == "" {
		return nil
	}
	return append([]string{s.Location}, s.FallbackLocations...)
}

// Locations are the nodes router r may run on, most preferred first: location, then
// fallbackLocations. Empty for a router without location, and for no router (r nil).
func (r *Router) Locations() []string {
	if r == nil || r.Location == "" {
		return nil
	}
	return append([]string{r.Location}, r.FallbackLocations...)
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

// Default writes every default into the spec, so that the stored Pipeline shows what the
// operator will do. It never changes a value the user set, with one exception: an autoscaled
// step loses replicas 1, the default this function stored before the step was autoscaled
// (see defaultAutoscaling). Storage capacity and access modes are defaulted only for the
// storage the operator creates (not for existingClaim).
func (p *Pipeline) Default() {
	spec := &p.Spec
	named := map[string]bool{}
	for _, s := range spec.Steps {
		named[s.Name] = true
	}
	for i := range spec.Steps {
		s := &spec.Steps[i]
		// A step that another step already took the default name of stays unnamed, so that
		// validation names the conflict instead of reporting two steps with one name.
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
	if rt := spec.Router; rt != nil && rt.Replicas == nil {
		r := rt.EffectiveReplicas()
		rt.Replicas = &r
	}
	if f := spec.Failover; f != nil {
		after, back, backAfter := f.EffectiveAfterSeconds(), f.EffectiveFailback(), f.EffectiveFailbackAfterSeconds()
		f.AfterSeconds, f.Failback, f.FailbackAfterSeconds = &after, back, &backAfter
	}
	m := &spec.ModelStorage
	m.Type = m.EffectiveType()
	m.MountPath = m.EffectiveMountPath()
	if m.Type != StorageTypeExistingClaim {
		if m.Capacity == nil {
			c := m.EffectiveCapacity()
			m.Capacity = &c
		}
		if len(m.AccessModes) == 0 {
			m.AccessModes = m.EffectiveAccessModes()
		}
	}
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
