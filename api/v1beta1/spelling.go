package v1beta1

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// FieldSpelling names the fields and values of a Pipeline as v1beta1 writes them. A request
// made in v1beta1 reaches the operator's admission webhooks converted to v1, and their checks
// find a v1 field; the operator gives them FieldSpelling for such requests, so that a refusal or
// a warning names what is in the requester's manifest (docs/migration.md maps the fields). The
// fields spelled the same in both versions keep their path.
//
// +kubebuilder:object:generate=false
type FieldSpelling struct{}

// Path is the v1beta1 field of the v1 field path of p, a Pipeline converted from v1beta1: an env
// entry of a step that v1beta1 wrote as an arg (p.LeadingEnv) is that arg, and the fields of
// v1Fields are renamed.
func (FieldSpelling) Path(path string, p *pipelinev1.Pipeline) string {
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
	for _, f := range v1Fields {
		if m := f.v1.FindStringSubmatchIndex(path); m != nil {
			return string(f.v1.ExpandString(nil, f.v1beta1, path, m))
		}
	}
	return path
}

// StorageType is v1beta1's name of the storage type t.
func (FieldSpelling) StorageType(t pipelinev1.ModelStorageType) string {
	if s, ok := storageTypesFrom[t]; ok {
		return string(s)
	}
	return string(t)
}

// RouterForInputs says that a step's inputs, which v1beta1 cannot write, need the router.
func (FieldSpelling) RouterForInputs() string {
	return "the router makes a step's request of its inputs (a field of " + pipelinev1.GroupVersion.String() +
		"): keep router.enabled true, or remove inputs in " + pipelinev1.GroupVersion.Version
}

// v1Fields are the v1 fields v1beta1 spells otherwise, in the order they are tried: each pattern
// matches a v1 path, its tail (an index, key or subfield) named tail, and the template gives the
// v1beta1 path.
var v1Fields = []struct {
	v1      *regexp.Regexp
	v1beta1 string
}{
	{regexp.MustCompile(`^spec\.dataPath\.mode(?P<tail>)$`), "spec.router.enabled"},
	{regexp.MustCompile(`^spec\.dataPath(?:\.router)?(?P<tail>[.[].*)?$`), "spec.router${tail}"},
	{regexp.MustCompile(`^spec\.modelStorage\.nfs\.server(?P<tail>[.[].*)?$`), "spec.modelStorage.csiParameter[" + nfsServerParameter + "]${tail}"},
	{regexp.MustCompile(`^spec\.modelStorage\.nfs\.path(?P<tail>[.[].*)?$`), "spec.modelStorage.csiParameter[" + nfsShareParameter + "]${tail}"},
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
