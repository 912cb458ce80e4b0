package admission

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// A request made in v1beta1 reaches these webhooks converted to v1 (they are registered for v1
// with matchPolicy Equivalent). Their checks then find a v1 field; fieldNames renames it to the
// v1beta1 field the requester wrote, so that a refusal or a warning names what is in their
// manifest, and spells the storage types as v1beta1 does. The fields that are spelled the same
// in both versions keep their path.

// fieldNames spells the fields and values that refusals and warnings name, for the version the
// request was made in. The zero value spells them in v1.
type fieldNames struct {
	// v1beta1 is the Pipeline, converted to v1, of a request made in v1beta1; nil for v1.
	v1beta1 *pipelinev1.Pipeline
}

// namesFor is the spelling for the request of ctx about p: v1beta1's for a v1beta1 request, v1's
// otherwise.
func namesFor(ctx context.Context, p *pipelinev1.Pipeline) fieldNames {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.RequestKind == nil || req.RequestKind.Version != "v1beta1" {
		return fieldNames{}
	}
	return fieldNames{v1beta1: p}
}

// path is the field path, written with the v1 path v1Path, in the request's version.
func (n fieldNames) path(v1Path string) string {
	if n.v1beta1 == nil {
		return v1Path
	}
	return v1beta1Path(v1Path, n.v1beta1)
}

// field is path for a *field.Path.
func (n fieldNames) field(p *field.Path) *field.Path {
	return field.NewPath(n.path(p.String()))
}

// prose is the field v1Path (under spec) as a message names it: without "spec.".
func (n fieldNames) prose(v1Path string) string {
	return strings.TrimPrefix(n.path(v1Path), "spec.")
}

// errors renames the field of every error of errs.
func (n fieldNames) errors(errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, len(errs))
	for i, e := range errs {
		c := *e
		c.Field = n.path(e.Field)
		out[i] = &c
	}
	return out
}

// routerForInputs says, in the request's version, that a step's inputs need the router.
func (n fieldNames) routerForInputs() string {
	if n.v1beta1 == nil {
		return "the router makes a step's request of its inputs: set dataPath.mode to Router, or remove inputs"
	}
	return "the router makes a step's request of its inputs (a field of " + pipelinev1.GroupVersion.String() +
		"): keep router.enabled true, or remove inputs in " + pipelinev1.GroupVersion.Version
}

// storageType spells the storage type t in the request's version.
func (n fieldNames) storageType(t pipelinev1.ModelStorageType) string {
	if n.v1beta1 == nil {
		return string(t)
	}
	if s, ok := v1beta1StorageTypes[t]; ok {
		return s
	}
	return string(t)
}

// v1beta1StorageTypes are v1beta1's spellings of the storage types.
var v1beta1StorageTypes = map[pipelinev1.ModelStorageType]string{
	pipelinev1.ModelStorageTypeNFS:               "nfs",
	pipelinev1.ModelStorageTypeCSI:               "csi",
	pipelinev1.ModelStorageTypeStorageClass:      "storageClass",
	pipelinev1.ModelStorageTypeExistingClaim:     "existingClaim",
	pipelinev1.ModelStorageTypeModelStorageClass: "modelStorageClass",
}

// v1beta1Fields are the v1 fields v1beta1 spells otherwise, in the order they are tried: each
// pattern matches a v1 path, its tail (an index, key or subfield) named tail, and the template
// gives the v1beta1 path (see docs/migration.md).
var v1beta1Fields = []struct {
	v1      *regexp.Regexp
	v1beta1 string
}{
	{regexp.MustCompile(`^spec\.dataPath\.mode(?P<tail>)$`), "spec.router.enabled"},
	{regexp.MustCompile(`^spec\.dataPath(?:\.router)?(?P<tail>[.[].*)?$`), "spec.router${tail}"},
	{regexp.MustCompile(`^spec\.modelStorage\.nfs\.server(?P<tail>[.[].*)?$`), "spec.modelStorage.csiParameter[server]${tail}"},
	{regexp.MustCompile(`^spec\.modelStorage\.nfs\.path(?P<tail>[.[].*)?$`), "spec.modelStorage.csiParameter[share]${tail}"},
	{regexp.MustCompile(`^spec\.modelStorage\.csi\.driver(?P<tail>[.[].*)?$`), "spec.modelStorage.csiParameter[driver]${tail}"},
	{regexp.MustCompile(`^spec\.modelStorage\.csi\.volumeAttributes(?P<tail>[.[].*)?$`), "spec.modelStorage.csiParameter${tail}"},
	{regexp.MustCompile(`^spec\.modelStorage\.(?:nfs|csi|storageClass|modelStorageClass)\.(?P<field>capacity|accessModes)(?P<tail>[.[].*)?$`),
		"spec.modelStorage.${field}${tail}"},
	{regexp.MustCompile(`^spec\.modelStorage\.storageClass\.name(?P<tail>[.[].*)?$`), "spec.modelStorage.storageClassName${tail}"},
	{regexp.MustCompile(`^spec\.modelStorage\.existingClaim\.name(?P<tail>[.[].*)?$`), "spec.modelStorage.claimName${tail}"},
	{regexp.MustCompile(`^spec\.modelStorage\.modelStorageClass\.name(?P<tail>[.[].*)?$`), "spec.modelStorage.modelStorageClassName${tail}"},
}

// stepEnv matches the path of an env entry of a step: spec.steps[<i>].env[<name>]...
var stepEnv = regexp.MustCompile(`^spec\.steps\[(\d+)\]\.env\[`)

// v1beta1Path is the v1beta1 field of the v1 field path of p, a Pipeline converted from
// v1beta1: an env entry of a step that v1beta1 wrote as an arg (p.LeadingEnv) is that arg, and
// the fields of v1beta1Fields are renamed.
func v1beta1Path(path string, p *pipelinev1.Pipeline) string {
	if m := stepEnv.FindStringSubmatch(path); m != nil {
		i, _ := strconv.Atoi(m[1])
		entry := path[len(m[0]):]
		for _, name := range p.LeadingEnv(i) {
			if rest, ok := strings.CutPrefix(entry, name+"]"); ok && (rest == "" || rest == ".name" || rest == ".value") {
				return fmt.Sprintf("spec.steps[%d].args[%s]", i, name)
			}
		}
		return path
	}
	for _, f := range v1beta1Fields {
		if m := f.v1.FindStringSubmatchIndex(path); m != nil {
			return string(f.v1.ExpandString(nil, f.v1beta1, path, m))
		}
	}
	return path
}
