package admission

import (
	"fmt"
	"net"
	"path"
	"slices"
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/stopwhen"
)

// injectedEnv are the environment variables the operator sets in every step's container.
var injectedEnv = sets.New(pipelinev1.InjectedEnv...)

// ValidatePipeline returns what the CRD schema cannot check: image references, node and
// object names, environment variable names, storage parameters, quantities and the pod fields
// the apiserver would otherwise refuse only when the operator writes the step's Deployment. It
// is pure, and names the v1 fields: the checks that need the cluster are warnings (see
// warnings), and a request made in v1beta1 gets its fields renamed (fieldNames).
func ValidatePipeline(p *pipelinev1.Pipeline) field.ErrorList {
	return validatePipeline(p, nil, fieldNames{})
}

// validatePipeline is ValidatePipeline of p, an update of old (nil on create), with messages in
// the spelling n. The errors' paths are v1's.
func validatePipeline(p, old *pipelinev1.Pipeline, n fieldNames) field.ErrorList {
	var errs field.ErrorList
	specPath := field.NewPath("spec")
	for i := range p.Spec.Steps {
		errs = append(errs, validateStep(&p.Spec.Steps[i], specPath.Child("steps").Index(i))...)
	}
	errs = append(errs, validateTensorInputs(p, specPath.Child("steps"), n)...)
	errs = append(errs, validateStorage(&p.Spec.ModelStorage, specPath.Child("modelStorage"))...)
	if rt := routerOf(p); rt != nil {
		rp := specPath.Child("dataPath", "router")
		errs = append(errs, validateNodeNames(rt.Location, rt.FallbackLocations, rp)...)
		errs = append(errs, validateResources(rt.Resources, rp.Child("resources"))...)
		errs = append(errs, validateAnswerOutputs(p, rt, rp)...)
		kept := sets.New[pipelinev1.HeaderName]()
		if ort := routerOf(old); ort != nil {
			kept.Insert(ort.PropagateHeaders...)
		}
		for i, h := range rt.PropagateHeaders {
			// A name already there was admitted when the router's list of the headers it sets
			// was shorter: it stays, the router leaves it out, and a warning says so.
			if err := routerconfig.CheckPropagatedHeader(string(h)); err != nil && !kept.Has(h) {
				errs = append(errs, field.Invalid(rp.Child("propagateHeaders").Index(i), h, err.Error()))
			}
		}
	}
	return errs
}

// routerOf is the router's settings of p (nil when p is), which the CRD admits only with
// dataPath.mode Router (v1beta1's settings of a disabled router are kept in the conversion
// data, and not read).
func routerOf(p *pipelinev1.Pipeline) *pipelinev1.Router {
	if p == nil || p.Spec.DataPath == nil {
		return nil
	}
	return p.Spec.DataPath.Router
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
	errs = append(errs, validateStepPrivileges(s, sp)...)
	errs = append(errs, validateModelServer(s, sp)...)
	if s.StopWhen != "" {
		sw, err := stopwhen.Compile(s.StopWhen)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(sp.Child("stopWhen"), s.StopWhen, "not a valid CEL condition: "+err.Error()))
		case sw.ReadsTensors() && !s.Protocol.OpenInference():
			errs = append(errs, field.Invalid(sp.Child("stopWhen"), s.StopWhen,
				"reads tensors, which only the answer of a step of protocol OpenInferenceProtocol or OpenInferenceProtocolGRPC has"))
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

// validateToleration checks toleration t at tp. A toleration without a key and with operator
// Exists tolerates every taint (of its effect, when it names one): the control plane's, those
// that keep nodes for other teams or special hardware, and the NoExecute taints that evict pods
// from a node that fails. No step is given one: a step names each taint it tolerates by its key.
func validateToleration(t corev1.Toleration, tp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key == "" && t.Operator == corev1.TolerationOpExists {
		errs = append(errs, field.Forbidden(tp, "a toleration without a key tolerates every taint (the control plane's, "+
			"those of nodes kept for others, the eviction of a failed node's pods): name the taint in key"))
	}
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
			errs = append(errs, field.Required(tp.Child("key"), "a toleration names the taint it tolerates"))
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
	if member := storageMember(m.Type); member != "" {
		capacity, modes := storageSize(m)
		errs = append(errs, validateAccessModes(modes, mp.Child(member, "accessModes"))...)
		if capacity != nil && capacity.Sign() <= 0 {
			errs = append(errs, field.Invalid(mp.Child(member, "capacity"), capacity.String(), "must be greater than zero, e.g. 10Gi"))
		}
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

// storageMember is the member of the storage union that type t names, as the JSON spells it;
// empty for a type v1 does not know.
func storageMember(t pipelinev1.ModelStorageType) string {
	switch t {
	case pipelinev1.ModelStorageTypeNFS:
		return "nfs"
	case pipelinev1.ModelStorageTypeCSI:
		return "csi"
	case pipelinev1.ModelStorageTypeStorageClass:
		return "storageClass"
	case pipelinev1.ModelStorageTypeExistingClaim:
		return "existingClaim"
	case pipelinev1.ModelStorageTypeModelStorageClass:
		return "modelStorageClass"
	}
	return ""
}

// storageSize is the capacity and the access modes that the member of m's type sets; none for
// ExistingClaim, which has the size the claim has.
func storageSize(m *pipelinev1.ModelStorage) (*resource.Quantity, []corev1.PersistentVolumeAccessMode) {
	switch {
	case m.Type == pipelinev1.ModelStorageTypeNFS && m.NFS != nil:
		return m.NFS.Capacity, m.NFS.AccessModes
	case m.Type == pipelinev1.ModelStorageTypeCSI && m.CSI != nil:
		return m.CSI.Capacity, m.CSI.AccessModes
	case m.Type == pipelinev1.ModelStorageTypeStorageClass && m.StorageClass != nil:
		return m.StorageClass.Capacity, m.StorageClass.AccessModes
	case m.Type == pipelinev1.ModelStorageTypeModelStorageClass && m.ModelStorageClass != nil:
		return m.ModelStorageClass.Capacity, m.ModelStorageClass.AccessModes
	}
	return nil, nil
}

// validateStorageSource checks what says where the models are: the NFS export, the CSI driver,
// the StorageClass, the claim or the ModelStorageClass. The CRD's rules see to it that the
// member type names is the one set.
func validateStorageSource(m *pipelinev1.ModelStorage, mp *field.Path) field.ErrorList {
	switch {
	case m.Type == pipelinev1.ModelStorageTypeNFS && m.NFS != nil:
		return validateNFS(m.NFS, mp.Child("nfs"))
	case m.Type == pipelinev1.ModelStorageTypeCSI && m.CSI != nil:
		if driver := m.CSI.Driver; len(validation.IsDNS1123Subdomain(driver)) > 0 || len(driver) > 63 {
			return field.ErrorList{field.Invalid(mp.Child("csi", "driver"), driver,
				"must be a CSI driver name: a DNS name of at most 63 characters, e.g. nfs.csi.k8s.io")}
		}
	case m.Type == pipelinev1.ModelStorageTypeStorageClass && m.StorageClass != nil:
		return validateObjectName(m.StorageClass.Name, mp.Child("storageClass", "name"), "StorageClass")
	case m.Type == pipelinev1.ModelStorageTypeExistingClaim && m.ExistingClaim != nil:
		return validateObjectName(m.ExistingClaim.Name, mp.Child("existingClaim", "name"), "claim")
	case m.Type == pipelinev1.ModelStorageTypeModelStorageClass && m.ModelStorageClass != nil:
		return validateObjectName(m.ModelStorageClass.Name, mp.Child("modelStorageClass", "name"), "ModelStorageClass")
	}
	return nil
}

// validateNFS checks the NFS export at np: the server's address and the exported path.
func validateNFS(nfs *pipelinev1.NFSStorage, np *field.Path) field.ErrorList {
	var errs field.ErrorList
	if server := nfs.Server; server != "" && net.ParseIP(server) == nil && len(validation.IsDNS1123Subdomain(server)) > 0 {
		errs = append(errs, field.Invalid(np.Child("server"), server, "must be an IP address or a DNS name of the NFS server"))
	}
	if share := nfs.Path; share != "" && path.Clean(share) != strings.TrimSuffix(share, "/") && share != "/" {
		errs = append(errs, field.Invalid(np.Child("path"), share, fmt.Sprintf("must be a clean absolute path (%s)", path.Clean(share))))
	}
	return errs
}

// validateObjectName checks that name, at np, can name an object of the kind what.
func validateObjectName(name string, np *field.Path, what string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(np, name, fmt.Sprintf("not a valid %s name: %s", what, msg)))
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

// storageClassMove says why storage of type StorageClass cannot change and how to move its
// models, in the request's spelling n; the CRD's CEL rule on modelStorage says the same.
func storageClassMove(n fieldNames) string {
	return fmt.Sprintf("modelStorage of type %s cannot change (only mountPath may): its claim holds the models "+
		"and a new claim would start empty. To move the models: create a claim as you need it, copy the models into it, "+
		"and point a Pipeline at it with modelStorage.type %s and %s",
		n.storageType(pipelinev1.ModelStorageTypeStorageClass), n.storageType(pipelinev1.ModelStorageTypeExistingClaim),
		n.prose("spec.modelStorage.existingClaim.name"))
}

// ValidatePipelineUpdate returns what an update from old to p must not change: the storage of
// type StorageClass, whose claim the operator would replace by a new, empty one (its name
// follows the type and the whole storageClass member: name, capacity and access modes). Its
// messages are in v1's words.
func ValidatePipelineUpdate(old, p *pipelinev1.Pipeline) field.ErrorList {
	return validatePipelineUpdate(old, p, fieldNames{})
}

// validatePipelineUpdate is ValidatePipelineUpdate with messages in the spelling n. The errors'
// paths are v1's, as ValidatePipeline's.
func validatePipelineUpdate(old, p *pipelinev1.Pipeline, n fieldNames) field.ErrorList {
	was, is := &old.Spec.ModelStorage, &p.Spec.ModelStorage
	if was.Type != pipelinev1.ModelStorageTypeStorageClass || was.StorageClass == nil {
		return nil
	}
	mp := field.NewPath("spec", "modelStorage")
	if is.Type != pipelinev1.ModelStorageTypeStorageClass || is.StorageClass == nil {
		return field.ErrorList{field.Forbidden(mp.Child("type"),
			fmt.Sprintf("was %s: %s", n.storageType(pipelinev1.ModelStorageTypeStorageClass), storageClassMove(n)))}
	}
	var errs field.ErrorList
	forbid := func(name string, changed bool, from, to any) {
		if changed {
			errs = append(errs, field.Forbidden(mp.Child("storageClass", name), fmt.Sprintf("was %v, not %v: %s", from, to, storageClassMove(n))))
		}
	}
	forbid("name", was.StorageClass.Name != is.StorageClass.Name, was.StorageClass.Name, is.StorageClass.Name)
	wasSize, isSize := was.EffectiveCapacity(), is.EffectiveCapacity()
	forbid("capacity", wasSize.String() != isSize.String(), wasSize.String(), isSize.String())
	forbid("accessModes", !slices.Equal(was.EffectiveAccessModes(), is.EffectiveAccessModes()), was.EffectiveAccessModes(), is.EffectiveAccessModes())
	return errs
}

// warnings are admission warnings: things that are accepted but may not be what the user
// wants, with the fields they name spelled as n says. nodeExists reports whether a node is
// named, or labelled, by the given location; old is nil on create.
func warnings(p, old *pipelinev1.Pipeline, nodeExists func(string) (bool, error), n fieldNames) []string {
	var out []string
	locations, reachable := sets.New[string](), sets.New[string]()
	for i := range p.Spec.Steps {
		s := &p.Spec.Steps[i]
		name := s.Name
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
			}
		}
		if s.Protocol.OpenInference() && i < len(p.Spec.Steps)-1 && !p.Spec.RouterEnabled() {
			out = append(out, fmt.Sprintf("step %s speaks the Open Inference Protocol, whose servers answer and do not forward: "+
				"in dataPath.mode Chain the next step gets no request from it; set dataPath.mode to Router", name))
		}
	}
	out = append(out, routerWarnings(p, nodeExists)...)
	m := &p.Spec.ModelStorage
	if member := storageMember(m.Type); reachable.Len() > 1 && member != "" && m.Type != pipelinev1.ModelStorageTypeExistingClaim {
		modes := n.prose("spec.modelStorage." + member + ".accessModes")
		for _, am := range m.EffectiveAccessModes() {
			switch {
			case am != corev1.ReadWriteOnce && am != corev1.ReadWriteOncePod:
			case reachable.Len() == locations.Len():
				out = append(out, fmt.Sprintf("%s %s: steps on %d different nodes cannot all mount the volume", modes, am, locations.Len()))
			default:
				out = append(out, fmt.Sprintf("%s %s: steps may run on %d different nodes (their locations and fallbackLocations) "+
					"and cannot all mount the volume: a step that fails over may not start", modes, am, reachable.Len()))
			}
		}
	}
	if storageChanged(old, p) {
		out = append(out, storageChangeWarning(&old.Spec.ModelStorage, m))
	}
	return out
}

// storageChangeWarning says what a change of the storage from was to is does: where the steps
// move, and what becomes of the old storage. Storage of type StorageClass never gets here: it
// cannot change (see ValidatePipelineUpdate).
func storageChangeWarning(was, is *pipelinev1.ModelStorage) string {
	var w string
	switch {
	case is.Type == pipelinev1.ModelStorageTypeExistingClaim && is.ExistingClaim != nil:
		w = fmt.Sprintf("modelStorage changed: every step moves to claim %s (the steps' pods restart)", is.ExistingClaim.Name)
	case is.Type == pipelinev1.ModelStorageTypeStorageClass && is.StorageClass != nil:
		w = fmt.Sprintf("modelStorage changed: the operator creates a claim of StorageClass %s, which starts empty, "+
			"and moves every step onto it (the steps' pods restart)", is.StorageClass.Name)
	default:
		w = "modelStorage changed: the operator creates a new volume and claim and moves every step onto them (the steps' pods restart)"
	}
	switch {
	case was.Type == pipelinev1.ModelStorageTypeNFS, was.Type == pipelinev1.ModelStorageTypeCSI,
		was.Type == pipelinev1.ModelStorageTypeModelStorageClass:
		w += "; then it deletes the old volume and claim, whose reclaim policy Retain leaves the models on the NFS or CSI storage"
	case was.Type == pipelinev1.ModelStorageTypeExistingClaim && was.ExistingClaim != nil:
		if is.ExistingClaim == nil || is.ExistingClaim.Name != was.ExistingClaim.Name {
			w += fmt.Sprintf("; claim %s stays as it is", was.ExistingClaim.Name)
		}
	}
	return w
}

// routerWarnings are the warnings about p's router: a location no node has.
func routerWarnings(p *pipelinev1.Pipeline, nodeExists func(string) (bool, error)) []string {
	r := p.Spec.RouterSettings()
	if r == nil {
		return nil
	}
	var out []string
	if r.Location != "" && nodeExists != nil {
		if ok, err := nodeExists(r.Location); err == nil && !ok {
			out = append(out, missingLocationWarning("router", "the router", r.Location, r.FallbackLocations))
		}
	}
	for _, h := range r.PropagateHeaders {
		if err := routerconfig.CheckPropagatedHeader(string(h)); err != nil {
			out = append(out, fmt.Sprintf("router: propagateHeaders %s is not passed on to the steps: %v; remove it", h, err))
		}
	}
	return out
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
// that writing a default is not a change), without the mount path (which only moves the mount).
func storageOf(p *pipelinev1.Pipeline) pipelinev1.ModelStorage {
	c := p.DeepCopy()
	c.Default()
	m := c.Spec.ModelStorage
	m.MountPath = ""
	return m
}
