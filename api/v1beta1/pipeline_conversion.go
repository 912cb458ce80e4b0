package v1beta1

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// A v1beta1 Pipeline converts to and from v1, the hub, without loss both ways. Each part of
// the object (steps, storage, data path, failover, pause, status) converts on its own, by a
// pair of functions: to v1, and back. Where converting back does not give what was converted
// (v1beta1 says something v1 cannot hold, or the other way round), the converted object keeps
// the part it came from in the annotation ConversionDataAnnotation, as JSON. Converting back
// uses the kept part only when it still converts to what the object says now, so an edit
// made in the other version since wins over what was kept; the annotation is then removed.

// ConversionDataAnnotation holds what the other version of a Pipeline says and this version
// cannot hold (see pipeline_conversion.go). Do not edit it.
const ConversionDataAnnotation = pipelinev1.ConversionDataAnnotation

// Annotations of v1beta1 that v1 turned into fields (see pipelinev1.PausedAnnotation and
// pipelinev1.FailbackAnnotation).
const (
	// PausedAnnotation "true" is v1's spec.paused true.
	PausedAnnotation = pipelinev1.PausedAnnotation
	// FailbackAnnotation "true" is v1's spec.failover.failbackNow true.
	FailbackAnnotation = pipelinev1.FailbackAnnotation
)

var _ conversion.Convertible = &Pipeline{}

// v1Data is what a v1beta1 Pipeline keeps of the v1 Pipeline it was converted from.
type v1Data struct {
	Paused       *hubPaused                 `json:"paused,omitempty"`
	Failover     *hubFailover               `json:"failover,omitempty"`
	DataPath     *hubDataPath               `json:"dataPath,omitempty"`
	ModelStorage *pipelinev1.ModelStorage   `json:"modelStorage,omitempty"`
	Steps        map[int]pipelinev1.Step    `json:"steps,omitempty"`
	Status       *pipelinev1.PipelineStatus `json:"status,omitempty"`
}

// v1beta1Data is what a v1 Pipeline keeps of the v1beta1 Pipeline it was converted from.
type v1beta1Data struct {
	Paused       *spokePaused     `json:"paused,omitempty"`
	Failover     *spokeFailover   `json:"failover,omitempty"`
	Router       *spokeRouter     `json:"router,omitempty"`
	ModelStorage *ModelStorage    `json:"modelStorage,omitempty"`
	Steps        map[int]stepData `json:"steps,omitempty"`
	Status       *PipelineStatus  `json:"status,omitempty"`
}

// ConvertTo converts this Pipeline to the hub version, v1.
func (p *Pipeline) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*pipelinev1.Pipeline)
	if !ok {
		return fmt.Errorf("convert Pipeline %s/%s to v1: unexpected type %T", p.Namespace, p.Name, dstRaw)
	}
	in := p.DeepCopy()
	meta := in.ObjectMeta
	var kept v1Data
	takeConversionData(&meta, &kept)
	var lost v1beta1Data

	paused, lostPaused := convertPart(spokePaused{Annotation: popAnnotation(&meta, PausedAnnotation)}, kept.Paused, pausedTo, pausedFrom)
	failover, lostFailover := convertPart(spokeFailover{Failover: in.Spec.Failover, Annotation: popAnnotation(&meta, FailbackAnnotation)},
		kept.Failover, failoverTo, failoverFrom)
	dataPath, lostRouter := convertPart(spokeRouter{Router: in.Spec.Router}, kept.DataPath, routerTo, routerFrom)
	storage, lostStorage := convertPart(in.Spec.ModelStorage, kept.ModelStorage, storageTo, storageFrom)
	steps, lostSteps := stepsTo(in.Spec.Steps, kept.Steps)
	status, lostStatus := convertStatus(in.Status, kept.Status, statusTo, statusFrom,
		func(s *pipelinev1.PipelineStatus) *[]metav1.Condition { return &s.Conditions },
		func(s *PipelineStatus) *[]metav1.Condition { return &s.Conditions })
	lost.Paused, lost.Failover, lost.Router, lost.ModelStorage, lost.Steps, lost.Status =
		lostPaused, lostFailover, lostRouter, lostStorage, lostSteps, lostStatus

	dst.ObjectMeta = meta
	setAnnotation(&dst.ObjectMeta, PausedAnnotation, paused.Annotation)
	setAnnotation(&dst.ObjectMeta, FailbackAnnotation, failover.Annotation)
	dst.Spec = pipelinev1.PipelineSpec{
		Steps:        steps,
		ModelStorage: storage,
		DataPath:     dataPath.DataPath,
		Expose:       exposeTo(in.Spec.Expose),
		Failover:     failover.Failover,
		Paused:       paused.Paused,
	}
	dst.Status = status
	if err := putConversionData(&dst.ObjectMeta, lost, isEmptyV1beta1Data(lost)); err != nil {
		return fmt.Errorf("convert Pipeline %s/%s to v1: %w", p.Namespace, p.Name, err)
	}
	if lost.ModelStorage != nil {
		// The names of the storage hash its identity as v1beta1 says it: recorded in v1.
		RecordStorageIdentity(dst)
	}
	return nil
}

// ConvertFrom converts the hub version, v1, to this Pipeline.
func (p *Pipeline) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*pipelinev1.Pipeline)
	if !ok {
		return fmt.Errorf("convert Pipeline to v1beta1: unexpected type %T", srcRaw)
	}
	in := src.DeepCopy()
	meta := in.ObjectMeta
	var kept v1beta1Data
	takeConversionData(&meta, &kept)
	var lost v1Data

	paused, lostPaused := convertPart(hubPaused{Paused: in.Spec.Paused, Annotation: popAnnotation(&meta, PausedAnnotation)},
		kept.Paused, pausedFrom, pausedTo)
	failover, lostFailover := convertPart(hubFailover{Failover: in.Spec.Failover, Annotation: popAnnotation(&meta, FailbackAnnotation)},
		kept.Failover, failoverFrom, failoverTo)
	router, lostDataPath := convertPart(hubDataPath{DataPath: in.Spec.DataPath}, kept.Router, routerFrom, routerTo)
	storage, lostStorage := convertPart(in.Spec.ModelStorage, kept.ModelStorage, storageFrom, storageTo)
	steps, lostSteps := stepsFrom(in.Spec.Steps, kept.Steps)
	status, lostStatus := convertStatus(in.Status, kept.Status, statusFrom, statusTo,
		func(s *PipelineStatus) *[]metav1.Condition { return &s.Conditions },
		func(s *pipelinev1.PipelineStatus) *[]metav1.Condition { return &s.Conditions })
	lost.Paused, lost.Failover, lost.DataPath, lost.ModelStorage, lost.Steps, lost.Status =
		lostPaused, lostFailover, lostDataPath, lostStorage, lostSteps, lostStatus

	p.ObjectMeta = meta
	setAnnotation(&p.ObjectMeta, PausedAnnotation, paused.Annotation)
	setAnnotation(&p.ObjectMeta, FailbackAnnotation, failover.Annotation)
	p.Spec = PipelineSpec{
		Steps:        steps,
		ModelStorage: storage,
		Expose:       exposeFrom(in.Spec.Expose),
		Router:       router.Router,
		Failover:     failover.Failover,
	}
	p.Status = status
	if err := putConversionData(&p.ObjectMeta, lost, isEmptyV1Data(lost)); err != nil {
		return fmt.Errorf("convert Pipeline %s/%s to v1beta1: %w", src.Namespace, src.Name, err)
	}
	return p.keepStorageIdentity(src)
}

// keepStorageIdentity leaves on p, converted from src, the storage identity src records
// (pipelinev1.StorageIdentityAnnotation) unless converting p back to v1 records it again: the
// identity of storage v1beta1 says otherwise than v1, which the conversion to v1 records. A
// Pipeline that goes to v1beta1 and back is then the one it was, both ways.
func (p *Pipeline) keepStorageIdentity(src *pipelinev1.Pipeline) error {
	recorded, ok := src.Annotations[pipelinev1.StorageIdentityAnnotation]
	if !ok {
		return nil
	}
	p.Annotations = withoutAnnotation(p.Annotations, pipelinev1.StorageIdentityAnnotation)
	again := &pipelinev1.Pipeline{}
	if err := p.DeepCopy().ConvertTo(again); err != nil {
		return err
	}
	if again.Annotations[pipelinev1.StorageIdentityAnnotation] != recorded {
		setAnnotation(&p.ObjectMeta, pipelinev1.StorageIdentityAnnotation, &recorded)
	}
	return nil
}

// withoutAnnotation is annotations without key, nil when nothing is left.
func withoutAnnotation(annotations map[string]string, key string) map[string]string {
	meta := metav1.ObjectMeta{Annotations: annotations}
	popAnnotation(&meta, key)
	return meta.Annotations
}

// convertPart converts the part s of an object with to, whose inverse is back. kept is what
// the object kept of the part it was converted from (nil: nothing); it is the result when it
// converts back to s, that is when s did not change since. lost is s when converting the
// result back does not give s: the converted object must keep it.
func convertPart[S, D any](s S, kept *D, to func(S) D, back func(D) S) (d D, lost *S) {
	d = to(s)
	if kept != nil && apiequality.Semantic.DeepEqual(back(*kept), s) {
		d = *kept
	}
	if !apiequality.Semantic.DeepEqual(back(d), s) {
		lost = &s
	}
	return d, lost
}

// convertStatus is convertPart for the status, whose conditions convert as they are and are
// therefore neither kept nor compared apart from the rest.
func convertStatus[S, D any](s S, kept *D, to func(S) D, back func(D) S, dConds func(*D) *[]metav1.Condition,
	sConds func(*S) *[]metav1.Condition) (D, *S) {
	if kept != nil {
		*dConds(kept) = *sConds(&s)
	}
	d, lost := convertPart(s, kept, to, back)
	if lost != nil {
		*sConds(lost) = nil
	}
	return d, lost
}

// takeConversionData removes ConversionDataAnnotation from meta and decodes it into data. A
// value that does not decode (edited by hand) is dropped: it only ever helps converting back.
func takeConversionData(meta *metav1.ObjectMeta, data any) {
	raw := popAnnotation(meta, ConversionDataAnnotation)
	if raw != nil {
		_ = json.Unmarshal([]byte(*raw), data)
	}
}

// putConversionData writes data into ConversionDataAnnotation of meta, unless it is empty.
func putConversionData(meta *metav1.ObjectMeta, data any, empty bool) error {
	if empty {
		return nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("encode %s: %w", ConversionDataAnnotation, err)
	}
	s := string(raw)
	setAnnotation(meta, ConversionDataAnnotation, &s)
	return nil
}

func isEmptyV1beta1Data(d v1beta1Data) bool {
	return d.Paused == nil && d.Failover == nil && d.Router == nil && d.ModelStorage == nil && d.Steps == nil && d.Status == nil
}

func isEmptyV1Data(d v1Data) bool {
	return d.Paused == nil && d.Failover == nil && d.DataPath == nil && d.ModelStorage == nil && d.Steps == nil && d.Status == nil
}

// popAnnotation removes the annotation key from meta and returns its value, nil when absent.
func popAnnotation(meta *metav1.ObjectMeta, key string) *string {
	v, ok := meta.Annotations[key]
	if !ok {
		return nil
	}
	annotations := make(map[string]string, len(meta.Annotations)-1)
	for k, val := range meta.Annotations {
		if k != key {
			annotations[k] = val
		}
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	meta.Annotations = annotations
	return &v
}

// setAnnotation sets the annotation key of meta to *value; nil sets nothing.
func setAnnotation(meta *metav1.ObjectMeta, key string, value *string) {
	if value == nil {
		return
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[key] = *value
}

func ptrTo[T any](v T) *T { return &v }

// Pause: v1beta1's annotation PausedAnnotation "true" is v1's spec.paused true. Any other value
// of the annotation means nothing in either version and stays as it is.

type spokePaused struct {
	Annotation *string `json:"annotation,omitempty"`
}

type hubPaused struct {
	Paused     *bool   `json:"paused,omitempty"`
	Annotation *string `json:"annotation,omitempty"`
}

func pausedTo(s spokePaused) hubPaused {
	if s.Annotation != nil && *s.Annotation == "true" {
		return hubPaused{Paused: ptrTo(true)}
	}
	return hubPaused{Annotation: s.Annotation}
}

func pausedFrom(h hubPaused) spokePaused {
	if h.Paused != nil && *h.Paused {
		return spokePaused{Annotation: ptrTo("true")}
	}
	return spokePaused{Annotation: h.Annotation}
}

// Failover: the same fields, and v1beta1's one-shot annotation FailbackAnnotation "true" is
// v1's spec.failover.failbackNow true.

type spokeFailover struct {
	Failover   *Failover `json:"failover,omitempty"`
	Annotation *string   `json:"annotation,omitempty"`
}

type hubFailover struct {
	Failover   *pipelinev1.Failover `json:"failover,omitempty"`
	Annotation *string              `json:"annotation,omitempty"`
}

func failoverTo(s spokeFailover) hubFailover {
	var out *pipelinev1.Failover
	if f := s.Failover; f != nil {
		out = &pipelinev1.Failover{
			AfterSeconds:         f.AfterSeconds,
			Failback:             pipelinev1.FailbackPolicy(f.Failback),
			FailbackAfterSeconds: f.FailbackAfterSeconds,
		}
	}
	if s.Annotation != nil && *s.Annotation == "true" {
		if out == nil {
			out = &pipelinev1.Failover{}
		}
		out.FailbackNow = ptrTo(true)
		return hubFailover{Failover: out}
	}
	return hubFailover{Failover: out, Annotation: s.Annotation}
}

func failoverFrom(h hubFailover) spokeFailover {
	f := h.Failover
	if f == nil {
		return spokeFailover{Annotation: h.Annotation}
	}
	out := &Failover{
		AfterSeconds:         f.AfterSeconds,
		Failback:             FailbackPolicy(f.Failback),
		FailbackAfterSeconds: f.FailbackAfterSeconds,
	}
	if f.FailbackNow == nil || !*f.FailbackNow {
		return spokeFailover{Failover: out, Annotation: h.Annotation}
	}
	if apiequality.Semantic.DeepEqual(*out, Failover{}) {
		out = nil
	}
	return spokeFailover{Failover: out, Annotation: ptrTo("true")}
}

// Data path: v1beta1's spec.router, switched by enabled, is v1's spec.dataPath: mode Router
// with the router's settings, or mode Chain. v1 has no place for the settings of a disabled
// router.

type spokeRouter struct {
	Router *Router `json:"router,omitempty"`
}

type hubDataPath struct {
	DataPath *pipelinev1.DataPath `json:"dataPath,omitempty"`
}

func routerTo(s spokeRouter) hubDataPath {
	r := s.Router
	if r == nil {
		return hubDataPath{}
	}
	if !r.Enabled {
		return hubDataPath{DataPath: &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain}}
	}
	settings := &pipelinev1.Router{
		Location:              r.Location,
		FallbackLocations:     r.FallbackLocations,
		Replicas:              r.Replicas,
		Resources:             r.Resources,
		MaxBodyBytes:          r.MaxBodyBytes,
		RequestTimeoutSeconds: r.RequestTimeoutSeconds,
	}
	for _, h := range r.PropagateHeaders {
		settings.PropagateHeaders = append(settings.PropagateHeaders, pipelinev1.HeaderName(h))
	}
	if apiequality.Semantic.DeepEqual(*settings, pipelinev1.Router{}) {
		settings = nil
	}
	return hubDataPath{DataPath: &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter, Router: settings}}
}

func routerFrom(h hubDataPath) spokeRouter {
	d := h.DataPath
	if d == nil {
		return spokeRouter{}
	}
	out := &Router{Enabled: d.Mode == pipelinev1.DataPathModeRouter}
	if r := d.Router; r != nil {
		out.Location, out.Replicas, out.Resources, out.MaxBodyBytes = r.Location, r.Replicas, r.Resources, r.MaxBodyBytes
		out.FallbackLocations, out.RequestTimeoutSeconds = r.FallbackLocations, r.RequestTimeoutSeconds
		for _, h := range r.PropagateHeaders {
			out.PropagateHeaders = append(out.PropagateHeaders, HeaderName(h))
		}
	}
	return spokeRouter{Router: out}
}

// Model storage: v1beta1's type and csiParameter map, whose keys mean something per type, is
// v1's union of one member per type.

var storageTypesTo = map[StorageType]pipelinev1.ModelStorageType{
	StorageTypeNFS:               pipelinev1.ModelStorageTypeNFS,
	StorageTypeCSI:               pipelinev1.ModelStorageTypeCSI,
	StorageTypeStorageClass:      pipelinev1.ModelStorageTypeStorageClass,
	StorageTypeExistingClaim:     pipelinev1.ModelStorageTypeExistingClaim,
	StorageTypeModelStorageClass: pipelinev1.ModelStorageTypeModelStorageClass,
}

var storageTypesFrom = invert(storageTypesTo)

// csiParameter keys of type nfs storage.
const (
	nfsServerParameter = "server"
	nfsShareParameter  = "share"
)

func storageTo(m ModelStorage) pipelinev1.ModelStorage {
	t := m.EffectiveType()
	out := pipelinev1.ModelStorage{Type: convertEnum(t, storageTypesTo), MountPath: m.MountPath}
	p := m.CSIParameter
	switch t {
	case StorageTypeNFS:
		out.NFS = &pipelinev1.NFSStorage{Server: p[nfsServerParameter], Path: p[nfsShareParameter], Capacity: m.Capacity, AccessModes: m.AccessModes}
	case StorageTypeCSI:
		driver := p[CSIDriverParameter]
		if driver == "" {
			driver = DefaultCSIDriver
		}
		var attributes map[string]string
		for k, v := range p {
			if k == CSIDriverParameter {
				continue
			}
			if attributes == nil {
				attributes = map[string]string{}
			}
			attributes[k] = v
		}
		out.CSI = &pipelinev1.CSIStorage{Driver: driver, VolumeAttributes: attributes, Capacity: m.Capacity, AccessModes: m.AccessModes}
	case StorageTypeStorageClass:
		out.StorageClass = &pipelinev1.StorageClassStorage{Name: m.StorageClassName, Capacity: m.Capacity, AccessModes: m.AccessModes}
	case StorageTypeExistingClaim:
		out.ExistingClaim = &pipelinev1.ExistingClaimStorage{Name: m.ClaimName}
	case StorageTypeModelStorageClass:
		out.ModelStorageClass = &pipelinev1.ModelStorageClassStorage{Name: m.ModelStorageClassName, Capacity: m.Capacity, AccessModes: m.AccessModes}
	}
	return out
}

func storageFrom(h pipelinev1.ModelStorage) ModelStorage {
	out := ModelStorage{Type: convertEnum(h.Type, storageTypesFrom), MountPath: h.MountPath}
	params := map[string]string{}
	if s := h.NFS; s != nil {
		if s.Server != "" {
			params[nfsServerParameter] = s.Server
		}
		if s.Path != "" {
			params[nfsShareParameter] = s.Path
		}
		out.Capacity, out.AccessModes = s.Capacity, s.AccessModes
	}
	if s := h.CSI; s != nil {
		for k, v := range s.VolumeAttributes {
			params[k] = v
		}
		params[CSIDriverParameter] = s.Driver
		out.Capacity, out.AccessModes = s.Capacity, s.AccessModes
	}
	if s := h.StorageClass; s != nil {
		out.StorageClassName, out.Capacity, out.AccessModes = s.Name, s.Capacity, s.AccessModes
	}
	if s := h.ExistingClaim; s != nil {
		out.ClaimName = s.Name
	}
	if s := h.ModelStorageClass; s != nil {
		out.ModelStorageClassName, out.Capacity, out.AccessModes = s.Name, s.Capacity, s.AccessModes
	}
	if len(params) > 0 {
		out.CSIParameter = params
	}
	return out
}

// Expose: the same fields in both versions.

func exposeTo(e *Expose) *pipelinev1.Expose {
	if e == nil {
		return nil
	}
	out := &pipelinev1.Expose{ServiceType: pipelinev1.ServiceType(e.ServiceType)}
	if i := e.Ingress; i != nil {
		out.Ingress = &pipelinev1.IngressExpose{Host: i.Host, Path: i.Path, PathType: pipelinev1.IngressPathType(i.PathType),
			ClassName: i.ClassName, TLSSecretName: i.TLSSecretName}
	}
	return out
}

func exposeFrom(e *pipelinev1.Expose) *Expose {
	if e == nil {
		return nil
	}
	out := &Expose{ServiceType: ServiceType(e.ServiceType)}
	if i := e.Ingress; i != nil {
		out.Ingress = &IngressExpose{Host: i.Host, Path: i.Path, PathType: IngressPathType(i.PathType),
			ClassName: i.ClassName, TLSSecretName: i.TLSSecretName}
	}
	return out
}

// convertEnum maps v through values; a value it does not know stays as it is.
func convertEnum[F, T ~string](v F, values map[F]T) T {
	if t, ok := values[v]; ok {
		return t
	}
	return T(v)
}

func invert[F, T comparable](m map[F]T) map[T]F {
	out := make(map[T]F, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

// Steps: v1 names every step (v1beta1's unnamed step is step-<position>), has one port field
// (v1beta1's args.listenPort, when port is unset, gives it), and one list of environment
// variables: v1beta1's args, sorted by name, then its env (an env entry replaces the arg of
// its name, as it does in the container). A v1 step converts to a v1beta1 step with its name,
// port and env as they are. The fields of a v1 step that v1beta1 has not (command, args, probes,
// podMetadata, ...) are kept with the whole v1 step; the step's v1beta1 form, its args
// included, is kept alongside, so that a step made in v1beta1 and given such fields in v1 keeps
// both through a round trip.

// stepData is what a v1 step keeps of the v1beta1 step it was converted from: enough to make
// it again from the v1 step, or the whole step when that is not enough.
type stepData struct {
	// Unnamed: the step had no name (v1 calls it step-<position>).
	Unnamed bool `json:"unnamed,omitempty"`
	// Args are the names of the env entries that were args (their values are in env).
	Args []string `json:"args,omitempty"`
	// ShadowedArgs are the args an env entry of the same name replaced.
	ShadowedArgs map[string]ArgValue `json:"shadowedArgs,omitempty"`
	// PortUnset: port was unset (v1's port is args.listenPort).
	PortUnset bool `json:"portUnset,omitempty"`
	// Step is the whole step, when the above cannot make it again.
	Step *Step `json:"step,omitempty"`
}

func stepsTo(steps []Step, kept map[int]pipelinev1.Step) ([]pipelinev1.Step, map[int]stepData) {
	var out []pipelinev1.Step
	var lost map[int]stepData
	for i := range steps {
		s := steps[i]
		h := stepTo(s, i)
		if k, ok := kept[i]; ok && (apiequality.Semantic.DeepEqual(stepFrom(k), s) || sameButV1Only(k, h)) {
			h = k
		}
		if back := stepFrom(h); !apiequality.Semantic.DeepEqual(back, s) {
			data := stepDataFor(s, h)
			if !apiequality.Semantic.DeepEqual(restoreStep(back, data), s) {
				data = stepData{Step: &s}
			}
			if lost == nil {
				lost = map[int]stepData{}
			}
			lost[i] = data
		}
		out = append(out, h)
	}
	return out, lost
}

func stepsFrom(steps []pipelinev1.Step, kept map[int]stepData) ([]Step, map[int]pipelinev1.Step) {
	var out []Step
	var lost map[int]pipelinev1.Step
	for i := range steps {
		h := steps[i]
		s := stepFrom(h)
		if k, ok := kept[i]; ok {
			if restored := restoreStep(s, k); sameButV1Only(h, stepTo(restored, i)) {
				s = restored
			}
		}
		if !apiequality.Semantic.DeepEqual(stepTo(s, i), h) {
			if lost == nil {
				lost = map[int]pipelinev1.Step{}
			}
			lost[i] = h
		}
		out = append(out, s)
	}
	return out, lost
}

// sameButV1Only reports whether v1 steps a and b differ at most in the fields v1beta1 has not:
// their v1beta1 forms are equal.
func sameButV1Only(a, b pipelinev1.Step) bool {
	return apiequality.Semantic.DeepEqual(stepFrom(a), stepFrom(b))
}

// stepTo converts step s, at index i, to v1.
func stepTo(s Step, i int) pipelinev1.Step {
	out := pipelinev1.Step{
		Name:              s.Name,
		Image:             s.Image,
		Location:          s.Location,
		FallbackLocations: s.FallbackLocations,
		Model:             s.Model,
		Port:              s.Port,
		Env:               stepEnvTo(s),
		Replicas:          s.Replicas,
		Resources:         s.Resources,
		NodeSelector:      s.NodeSelector,
		Tolerations:       s.Tolerations,
		SecurityContext:   s.SecurityContext,
		TimeoutSeconds:    s.TimeoutSeconds,
		Retries:           s.Retries,
		Idempotent:        s.Idempotent,
		StopWhen:          s.StopWhen,
	}
	if out.Name == "" {
		out.Name = pipelinev1.DefaultStepName(i)
	}
	if out.Port == nil {
		if v, ok := s.Args[ListenPortArg]; ok {
			if n, err := strconv.ParseInt(string(v), 10, 32); err == nil && n > 0 && n <= 65535 {
				out.Port = ptrTo(int32(n))
			}
		}
	}
	if a := s.Autoscaling; a != nil {
		out.Autoscaling = &pipelinev1.StepAutoscaling{
			MinReplicas:                       a.MinReplicas,
			MaxReplicas:                       a.MaxReplicas,
			TargetCPUUtilizationPercentage:    a.TargetCPUUtilizationPercentage,
			TargetMemoryUtilizationPercentage: a.TargetMemoryUtilizationPercentage,
		}
	}
	return out
}

// stepEnvTo is the v1 env of step s: its args, sorted by name, that no env entry replaces,
// then its env.
func stepEnvTo(s Step) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, k := range sortedArgs(s) {
		if !hasEnv(s.Env, k) {
			env = append(env, corev1.EnvVar{Name: k, Value: string(s.Args[k])})
		}
	}
	return append(env, s.Env...)
}

// stepFrom converts a v1 step to v1beta1.
func stepFrom(h pipelinev1.Step) Step {
	out := Step{
		Name:              h.Name,
		Image:             h.Image,
		Location:          h.Location,
		FallbackLocations: h.FallbackLocations,
		Model:             h.Model,
		Port:              h.Port,
		Env:               h.Env,
		Replicas:          h.Replicas,
		Resources:         h.Resources,
		NodeSelector:      h.NodeSelector,
		Tolerations:       h.Tolerations,
		SecurityContext:   h.SecurityContext,
		TimeoutSeconds:    h.TimeoutSeconds,
		Retries:           h.Retries,
		Idempotent:        h.Idempotent,
		StopWhen:          h.StopWhen,
	}
	if a := h.Autoscaling; a != nil {
		out.Autoscaling = &StepAutoscaling{
			MinReplicas:                       a.MinReplicas,
			MaxReplicas:                       a.MaxReplicas,
			TargetCPUUtilizationPercentage:    a.TargetCPUUtilizationPercentage,
			TargetMemoryUtilizationPercentage: a.TargetMemoryUtilizationPercentage,
		}
	}
	return out
}

// stepDataFor is what v1 step h keeps of step s, converted to it.
func stepDataFor(s Step, h pipelinev1.Step) stepData {
	data := stepData{Unnamed: s.Name == "", PortUnset: s.Port == nil && h.Port != nil}
	for _, k := range sortedArgs(s) {
		if hasEnv(s.Env, k) {
			if data.ShadowedArgs == nil {
				data.ShadowedArgs = map[string]ArgValue{}
			}
			data.ShadowedArgs[k] = s.Args[k]
		} else {
			data.Args = append(data.Args, k)
		}
	}
	return data
}

// restoreStep makes the v1beta1 step again from s, converted from v1, and what the v1 step kept.
func restoreStep(s Step, data stepData) Step {
	if data.Step != nil {
		return *data.Step.DeepCopy()
	}
	out := *s.DeepCopy()
	if data.Unnamed {
		out.Name = ""
	}
	if data.PortUnset {
		out.Port = nil
	}
	if len(data.Args) == 0 && len(data.ShadowedArgs) == 0 {
		return out
	}
	out.Args = map[string]ArgValue{}
	for k, v := range data.ShadowedArgs {
		out.Args[k] = v
	}
	isArg := map[string]bool{}
	for _, k := range data.Args {
		isArg[k] = true
	}
	var env []corev1.EnvVar
	for _, e := range out.Env {
		if isArg[e.Name] && e.ValueFrom == nil {
			out.Args[e.Name] = ArgValue(e.Value)
			continue
		}
		env = append(env, e)
	}
	out.Env = env
	return out
}

func sortedArgs(s Step) []string {
	keys := make([]string, 0, len(s.Args))
	for k := range s.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// Status: v1 says with lists and numbers what v1beta1 encodes in strings (models "a,b",
// readySteps "2/3"), its enum values are PascalCase, and v1beta1's detailPhase is split into
// storage, ingressState, routerState and steps.

var phasesTo = map[PipelinePhase]pipelinev1.PipelinePhase{
	PipelinePhaseCreating: pipelinev1.PipelinePhaseCreating,
	PipelinePhaseRunning:  pipelinev1.PipelinePhaseRunning,
	PipelinePhaseFailed:   pipelinev1.PipelinePhaseFailed,
	PipelinePhaseDeleting: pipelinev1.PipelinePhaseDeleting,
}

var phasesFrom = invert(phasesTo)

func statusTo(s PipelineStatus) pipelinev1.PipelineStatus {
	d := s.DetailPhase
	out := pipelinev1.PipelineStatus{
		Conditions:         s.Conditions,
		ObservedGeneration: s.ObservedGeneration,
		Phase:              convertEnum(s.Phase, phasesTo),
		URL:                s.URL,
		NodePort:           s.NodePort,
		Storage: pipelinev1.StorageStatus{
			VolumeName: s.PVName, VolumeState: d.PVPhase, ClaimName: s.PVCName, ClaimState: d.PVCPhase,
		},
		IngressState:    pipelinev1.IngressState(d.IngressPhase),
		RouterState:     pipelinev1.DeploymentState(d.RouterPhase),
		RouterNode:      d.RouterNode,
		RouterNodeReady: d.RouterNodeReady,
	}
	if s.Models != "" {
		out.Models = strings.Split(s.Models, ",")
	}
	out.ReadySteps, out.TotalSteps = readyStepsTo(s.ReadySteps)
	out.SetSummary()
	for _, st := range d.StepsPhase {
		out.Steps = append(out.Steps, stepStatusTo(st))
	}
	return out
}

func statusFrom(h pipelinev1.PipelineStatus) PipelineStatus {
	out := PipelineStatus{
		Conditions:         h.Conditions,
		ObservedGeneration: h.ObservedGeneration,
		Phase:              convertEnum(h.Phase, phasesFrom),
		URL:                h.URL,
		NodePort:           h.NodePort,
		PVName:             h.Storage.VolumeName,
		PVCName:            h.Storage.ClaimName,
		Models:             strings.Join(h.Models, ","),
		ReadySteps:         readyStepsFrom(h.ReadySteps, h.TotalSteps),
		DetailPhase: DetailPhase{
			PVPhase:         h.Storage.VolumeState,
			PVCPhase:        h.Storage.ClaimState,
			IngressPhase:    IngressPhase(h.IngressState),
			RouterPhase:     DeploymentPhase(h.RouterState),
			RouterNode:      h.RouterNode,
			RouterNodeReady: h.RouterNodeReady,
		},
	}
	for _, st := range h.Steps {
		out.DetailPhase.StepsPhase = append(out.DetailPhase.StepsPhase, stepStatusFrom(st))
	}
	return out
}

// readyStepsTo reads "<ready>/<total>"; a value written otherwise reads as nothing.
func readyStepsTo(s string) (ready, total *int32) {
	r, t, ok := strings.Cut(s, "/")
	if !ok {
		return nil, nil
	}
	rn, err1 := strconv.ParseInt(r, 10, 32)
	tn, err2 := strconv.ParseInt(t, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, nil
	}
	return ptrTo(int32(rn)), ptrTo(int32(tn))
}

func readyStepsFrom(ready, total *int32) string {
	if ready == nil && total == nil {
		return ""
	}
	return fmt.Sprintf("%d/%d", deref(ready), deref(total))
}

func stepStatusTo(s StepStatus) pipelinev1.StepStatus {
	out := pipelinev1.StepStatus{
		Name:            s.Name,
		DeploymentName:  s.DeploymentName,
		DeploymentState: pipelinev1.DeploymentState(s.DeploymentPhase),
		ServiceState:    pipelinev1.ServiceState(s.ServicePhase),
		URL:             s.URL,
		Replicas:        ptrTo(s.Replicas),
		ReadyReplicas:   ptrTo(s.ReadyReplicas),
		Node:            s.Node,
		NodeReady:       s.NodeReady,
	}
	if a := s.Autoscaling; a != nil {
		out.Autoscaling = &pipelinev1.StepAutoscalingStatus{
			MinReplicas:     ptrTo(a.MinReplicas),
			MaxReplicas:     ptrTo(a.MaxReplicas),
			CurrentReplicas: ptrTo(a.CurrentReplicas),
			DesiredReplicas: ptrTo(a.DesiredReplicas),
			ScalingActive:   a.ScalingActive,
			Message:         a.Message,
		}
	}
	return out
}

func stepStatusFrom(h pipelinev1.StepStatus) StepStatus {
	out := StepStatus{
		Name:            h.Name,
		DeploymentName:  h.DeploymentName,
		DeploymentPhase: DeploymentPhase(h.DeploymentState),
		ServicePhase:    ServicePhase(h.ServiceState),
		URL:             h.URL,
		Replicas:        deref(h.Replicas),
		ReadyReplicas:   deref(h.ReadyReplicas),
		Node:            h.Node,
		NodeReady:       h.NodeReady,
	}
	if a := h.Autoscaling; a != nil {
		out.Autoscaling = &StepAutoscalingStatus{
			MinReplicas:     deref(a.MinReplicas),
			MaxReplicas:     deref(a.MaxReplicas),
			CurrentReplicas: deref(a.CurrentReplicas),
			DesiredReplicas: deref(a.DesiredReplicas),
			ScalingActive:   a.ScalingActive,
			Message:         a.Message,
		}
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
