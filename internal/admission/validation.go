package admission

import (
	"fmt"
	"maps"
	"net"
	"path"
	"slices"
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/router"
)

// injectedEnv are the environment variables the operator sets in every step's container.
var injectedEnv = sets.New(pipelinev1.InjectedEnv...)

// ValidatePipeline returns what the CRD schema cannot check: image references, node and
// object names, storage parameters, quantities and the pod fields the apiserver would
// otherwise refuse only when the operator writes the step's Deployment. It is pure: the
// checks that need the cluster are warnings (see warnings).
func ValidatePipeline(p *pipelinev1.Pipeline) field.ErrorList {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	stepsPath := specPath.Child("steps")
	names := map[string]int{}
	for i := range p.Spec.Steps {
		s := &p.Spec.Steps[i]
		sp := stepsPath.Index(i)
		name := p.Spec.StepName(i)
		if j, dup := names[name]; dup {
			errs = append(errs, field.Duplicate(sp.Child("name"),
				fmt.Sprintf("%s (also the name of steps[%d]; unnamed steps are called step-<position>)", name, j)))
		}
		names[name] = i
		errs = append(errs, validateStep(s, sp)...)
	}
	errs = append(errs, validateStorage(&p.Spec.ModelStorage, specPath.Child("modelStorage"))...)
	if rt := p.Spec.Router; rt != nil {
		rp := specPath.Child("router")
		errs = append(errs, validateNodeNames(rt.Location, rt.FallbackLocations, rp)...)
		errs = append(errs, validateResources(rt.Resources, rp.Child("resources"))...)
		for i, h := range rt.PropagateHeaders {
			if err := router.CheckPropagatedHeader(string(h)); err != nil {
				errs = append(errs, field.Invalid(specPath.Child("router", "propagateHeaders").Index(i), h, err.Error()))
			}
		}
	}
	return errs
}

func validateStep(s *pipelinev1.Step, sp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := reference.ParseNormalizedNamed(s.Image); err != nil {
		errs = append(errs, field.Invalid(sp.Child("image"), s.Image,
			fmt.Sprintf("not a valid image reference (%v): expected [registry/]repository[:tag][@digest], lowercase, without spaces", err)))
	}
	errs = append(errs, validateNodeNames(s.Location, s.FallbackLocations, sp)...)
	for _, e := range s.Env {
		ep := sp.Child("env").Key(e.Name)
		if e.Name == "" || strings.ContainsAny(e.Name, "= \t\n") {
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, "environment variable names must be non-empty and contain no '=' or whitespace"))
		}
		if e.Value != "" && e.ValueFrom != nil {
			errs = append(errs, field.Invalid(ep, e.Name, "set value or valueFrom, not both"))
		}
	}
	errs = append(errs, validateResources(s.Resources, sp.Child("resources"))...)
	if s.StopWhen != "" {
		if _, err := router.CompileStopWhen(s.StopWhen); err != nil {
			errs = append(errs, field.Invalid(sp.Child("stopWhen"), s.StopWhen, "not a valid CEL condition: "+err.Error()))
		}
	}
	for k, v := range s.NodeSelector {
		kp := sp.Child("nodeSelector").Key(k)
		if k == corev1.LabelHostname {
			errs = append(errs, field.Forbidden(kp, "use location to choose the node"))
			continue
		}
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(kp, k, "not a valid label key: "+msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(kp, v, "not a valid label value: "+msg))
		}
	}
	for j, t := range s.Tolerations {
		errs = append(errs, validateToleration(t, sp.Child("tolerations").Index(j))...)
	}
	return errs
}

// validateNodeNames checks that location and fallbackLocations, of the step or router at
// path, are node names: the pattern of the schema lets through names such as a..b.
func validateNodeNames(location string, fallbackLocations []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(p *field.Path, name string) {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, field.Invalid(p, name, "not a valid node name: "+msg))
		}
	}
	if location != "" {
		check(path.Child("location"), location)
	}
	for i, n := range fallbackLocations {
		check(path.Child("fallbackLocations").Index(i), n)
	}
	return errs
}

func validateResources(r *corev1.ResourceRequirements, rp *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	for name, req := range r.Requests {
		if req.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), req.String(), "must not be negative"))
		}
		if limit, ok := r.Limits[name]; ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(rp.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must not exceed the limit %s", limit.String())))
		}
	}
	for name, limit := range r.Limits {
		if limit.Sign() < 0 {
			errs = append(errs, field.Invalid(rp.Child("limits").Key(string(name)), limit.String(), "must not be negative"))
		}
	}
	return errs
}

func validateToleration(t corev1.Toleration, tp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(tp.Child("key"), t.Key, "not a valid taint key: "+msg))
		}
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(tp.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			errs = append(errs, field.Invalid(tp.Child("operator"), t.Operator, "a toleration without a key must use operator Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(tp.Child("operator"), t.Operator, []string{string(corev1.TolerationOpExists), string(corev1.TolerationOpEqual)}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect, []string{
			string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}))
	}
	return errs
}

var accessModes = []string{
	string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOnce), string(corev1.ReadWriteOncePod),
}

func validateStorage(m *pipelinev1.ModelStorage, mp *field.Path) field.ErrorList {
	errs := validateStorageSource(m, mp)
	errs = append(errs, validateAccessModes(m.AccessModes, mp.Child("accessModes"))...)
	if m.Capacity != nil && m.Capacity.Sign() <= 0 {
		errs = append(errs, field.Invalid(mp.Child("capacity"), m.Capacity.String(), "must be greater than zero, e.g. 10Gi"))
	}
	if mount := m.MountPath; mount != "" {
		switch {
		case mount == "/":
			errs = append(errs, field.Invalid(mp.Child("mountPath"), mount, "must not be the root directory"))
		case path.Clean(mount) != mount:
			errs = append(errs, field.Invalid(mp.Child("mountPath"), mount, fmt.Sprintf("must be a clean absolute path (%s)", path.Clean(mount))))
		case strings.Contains(mount, ":"):
			errs = append(errs, field.Invalid(mp.Child("mountPath"), mount, "must not contain ':'"))
		}
	}
	return errs
}

// validateStorageSource checks what says where the models are: the NFS export, the CSI driver,
// the StorageClass, the claim or the ModelStorageClass.
func validateStorageSource(m *pipelinev1.ModelStorage, mp *field.Path) field.ErrorList {
	var errs field.ErrorList
	params := mp.Child("csiParameter")
	switch m.EffectiveType() {
	case pipelinev1.StorageTypeNFS:
		if server, ok := m.CSIParameter["server"]; ok && net.ParseIP(server) == nil && len(validation.IsDNS1123Subdomain(server)) > 0 {
			errs = append(errs, field.Invalid(params.Key("server"), server, "must be an IP address or a DNS name of the NFS server"))
		}
		if share, ok := m.CSIParameter["share"]; ok && path.Clean(share) != strings.TrimSuffix(share, "/") && share != "/" {
			errs = append(errs, field.Invalid(params.Key("share"), share, fmt.Sprintf("must be a clean absolute path (%s)", path.Clean(share))))
		}
	case pipelinev1.StorageTypeCSI:
		if driver, ok := m.CSIParameter[pipelinev1.CSIDriverParameter]; ok {
			if msgs := validation.IsDNS1123Subdomain(driver); len(msgs) > 0 || len(driver) > 63 {
				errs = append(errs, field.Invalid(params.Key(pipelinev1.CSIDriverParameter), driver,
					"must be a CSI driver name: a DNS name of at most 63 characters, e.g. nfs.csi.k8s.io"))
			}
		}
	case pipelinev1.StorageTypeStorageClass:
		for _, msg := range validation.IsDNS1123Subdomain(m.StorageClassName) {
			errs = append(errs, field.Invalid(mp.Child("storageClassName"), m.StorageClassName, "not a valid StorageClass name: "+msg))
		}
	case pipelinev1.StorageTypeExistingClaim:
		for _, msg := range validation.IsDNS1123Subdomain(m.ClaimName) {
			errs = append(errs, field.Invalid(mp.Child("claimName"), m.ClaimName, "not a valid claim name: "+msg))
		}
	case pipelinev1.StorageTypeModelStorageClass:
		for _, msg := range validation.IsDNS1123Subdomain(m.ModelStorageClassName) {
			errs = append(errs, field.Invalid(mp.Child("modelStorageClassName"), m.ModelStorageClassName, "not a valid ModelStorageClass name: "+msg))
		}
	}
	return errs
}

func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, ap *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[corev1.PersistentVolumeAccessMode]()
	for i, am := range modes {
		switch {
		case !slices.Contains(accessModes, string(am)):
			errs = append(errs, field.NotSupported(ap.Index(i), am, accessModes))
		case seen.Has(am):
			errs = append(errs, field.Duplicate(ap.Index(i), am))
		}
		seen.Insert(am)
	}
	return errs
}

// storageClassMove says why the storage of type storageClass cannot change and how to move its
// models; the CRD's CEL rule on modelStorage says the same.
const storageClassMove = "modelStorage of type storageClass cannot change (only mountPath may): its claim holds the models " +
	"and a new claim would start empty. To move the models: create a claim as you need it, copy the models into it, " +
	"and point a Pipeline at it with modelStorage.type existingClaim and claimName"

// ValidatePipelineUpdate returns what an update from old to p must not change: the storage of
// type storageClass, whose claim the operator would replace by a new, empty one (its name
// follows the type, storageClassName, capacity, accessModes and csiParameter).
func ValidatePipelineUpdate(old, p *pipelinev1.Pipeline) field.ErrorList {
	was, is := &old.Spec.ModelStorage, &p.Spec.ModelStorage
	if was.EffectiveType() != pipelinev1.StorageTypeStorageClass {
		return nil
	}
	mp := field.NewPath("spec", "modelStorage")
	if is.EffectiveType() != pipelinev1.StorageTypeStorageClass {
		return field.ErrorList{field.Forbidden(mp.Child("type"), fmt.Sprintf("was storageClass: %s", storageClassMove))}
	}
	var errs field.ErrorList
	forbid := func(name string, changed bool, from, to any) {
		if changed {
			errs = append(errs, field.Forbidden(mp.Child(name), fmt.Sprintf("was %v, not %v: %s", from, to, storageClassMove)))
		}
	}
	forbid("storageClassName", was.StorageClassName != is.StorageClassName, was.StorageClassName, is.StorageClassName)
	wasSize, isSize := was.EffectiveCapacity(), is.EffectiveCapacity()
	forbid("capacity", wasSize.String() != isSize.String(), wasSize.String(), isSize.String())
	forbid("accessModes", !slices.Equal(was.EffectiveAccessModes(), is.EffectiveAccessModes()), was.EffectiveAccessModes(), is.EffectiveAccessModes())
	forbid("csiParameter", !maps.Equal(was.CSIParameter, is.CSIParameter), was.CSIParameter, is.CSIParameter)
	return errs
}

// warnings are admission warnings: things that are accepted but may not be what the user
// wants. nodeExists reports whether a node is named, or labelled, by the given location; old is
// nil on create.
func warnings(p, old *pipelinev1.Pipeline, nodeExists func(string) (bool, error)) []string {
	var out []string
	locations, reachable := sets.New[string](), sets.New[string]()
	for i := range p.Spec.Steps {
		s := &p.Spec.Steps[i]
		name := p.Spec.StepName(i)
		if s.Location != "" {
			if !locations.Has(s.Location) && nodeExists != nil {
				if ok, err := nodeExists(s.Location); err == nil && !ok {
					out = append(out, missingLocationWarning("step "+name, "the step", s.Location, s.FallbackLocations))
				}
			}
			locations.Insert(s.Location)
		}
		reachable.Insert(s.Locations()...)
		out = append(out, autoscalingWarnings(name, s)...)
		for _, e := range s.Env {
			if injectedEnv.Has(e.Name) {
				out = append(out, fmt.Sprintf("step %s: env %s replaces the value the operator sets", name, e.Name))
			} else if _, ok := s.Args[e.Name]; ok {
				out = append(out, fmt.Sprintf("step %s: env %s replaces args.%s", name, e.Name, e.Name))
			}
		}
	}
	out = append(out, routerWarnings(p, nodeExists)...)
	m := &p.Spec.ModelStorage
	if reachable.Len() > 1 && m.EffectiveType() != pipelinev1.StorageTypeExistingClaim {
		for _, am := range m.EffectiveAccessModes() {
			switch {
			case am != corev1.ReadWriteOnce && am != corev1.ReadWriteOncePod:
			case reachable.Len() == locations.Len():
				out = append(out, fmt.Sprintf("modelStorage.accessModes %s: steps on %d different nodes cannot all mount the volume", am, locations.Len()))
			default:
				out = append(out, fmt.Sprintf("modelStorage.accessModes %s: steps may run on %d different nodes (their locations and fallbackLocations) "+
					"and cannot all mount the volume: a step that fails over may not start", am, reachable.Len()))
			}
		}
	}
	if storageChanged(old, p) {
		out = append(out, storageChangeWarning(&old.Spec.ModelStorage, m))
	}
	return out
}

// storageChangeWarning says what a change of the storage from was to is does: where the steps
// move, and what becomes of the old storage. Storage of type storageClass never gets here: it
// cannot change (see ValidatePipelineUpdate).
func storageChangeWarning(was, is *pipelinev1.ModelStorage) string {
	var w string
	switch is.EffectiveType() {
	case pipelinev1.StorageTypeExistingClaim:
		w = fmt.Sprintf("modelStorage changed: every step moves to claim %s (the steps' pods restart)", is.ClaimName)
	case pipelinev1.StorageTypeStorageClass:
		w = fmt.Sprintf("modelStorage changed: the operator creates a claim of StorageClass %s, which starts empty, "+
			"and moves every step onto it (the steps' pods restart)", is.StorageClassName)
	default:
		w = "modelStorage changed: the operator creates a new volume and claim and moves every step onto them (the steps' pods restart)"
	}
	switch was.EffectiveType() {
	case pipelinev1.StorageTypeNFS, pipelinev1.StorageTypeCSI, pipelinev1.StorageTypeModelStorageClass:
		w += "; then it deletes the old volume and claim, whose reclaim policy Retain leaves the models on the NFS or CSI storage"
	case pipelinev1.StorageTypeExistingClaim:
		if is.EffectiveType() != pipelinev1.StorageTypeExistingClaim || is.ClaimName != was.ClaimName {
			w += fmt.Sprintf("; claim %s stays as it is", was.ClaimName)
		}
	}
	return w
}

// routerWarnings are the warnings about p's router: a location no node has.
func routerWarnings(p *pipelinev1.Pipeline, nodeExists func(string) (bool, error)) []string {
	r := p.Spec.Router
	if r == nil || !r.Enabled || r.Location == "" || nodeExists == nil {
		return nil
	}
	if ok, err := nodeExists(r.Location); err == nil && !ok {
		return []string{missingLocationWarning("router", "the router", r.Location, r.FallbackLocations)}
	}
	return nil
}

// missingLocationWarning is the warning about what (a step, named, or the router), called
// subject in the sentence, whose location no node has.
func missingLocationWarning(what, subject, location string, fallbacks []string) string {
	if len(fallbacks) == 0 {
		return fmt.Sprintf("%s: no node %q exists yet: %s stays pending until it joins the cluster", what, location, subject)
	}
	return fmt.Sprintf("%s: no node %q exists yet: %s starts on the first ready node of its fallbackLocations "+
		"and moves to %s once it joins the cluster as spec.failover.failback says", what, location, subject, location)
}

// storageChanged reports whether an update from old (nil on create) to p changes what
// identifies the volume and claim (storageOf).
func storageChanged(old, p *pipelinev1.Pipeline) bool {
	return old != nil && !equality.Semantic.DeepEqual(storageOf(old), storageOf(p))
}

// storageOf is what identifies the volume and claim: the storage spec with its defaults (so
// that writing a default is not a change), without the mount path (which only moves the mount)
// and, but for existingClaim, without claimName (which only existingClaim reads).
func storageOf(p *pipelinev1.Pipeline) pipelinev1.ModelStorage {
	c := p.DeepCopy()
	c.Default()
	m := c.Spec.ModelStorage
	m.MountPath = ""
	if m.Type != pipelinev1.StorageTypeExistingClaim {
		m.ClaimName = ""
	}
	return m
}
