package admission

import (
	"context"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// A request made in v1 reaches these webhooks converted to v1beta1 (they are registered for
// v1beta1 with matchPolicy Equivalent). Their checks then find a v1beta1 field; fieldNames
// renames it to the v1 field the requester wrote, so that a refusal names what is in their
// manifest. The fields that are spelled the same in both versions keep their path.

// fieldNames renames the paths of a refusal for the version the request was made in.
type fieldNames func(string) string

// namesFor is the renaming for the request of ctx about p: to v1 for a v1 request, none
// otherwise.
func namesFor(ctx context.Context, p *pipelinev1.Pipeline) fieldNames {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.RequestKind == nil || req.RequestKind.Version != "v1" {
		return func(path string) string { return path }
	}
	return func(path string) string { return v1Path(path, p) }
}

// errors renames the field of every error of errs.
func (n fieldNames) errors(errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, len(errs))
	for i, e := range errs {
		c := *e
		c.Field = n(e.Field)
		out[i] = &c
	}
	return out
}

// path renames p.
func (n fieldNames) path(p *field.Path) *field.Path {
	return field.NewPath(n(p.String()))
}

var argPath = regexp.MustCompile(`^(spec\.steps\[\d+\])\.args(\[(.*)\])?(.*)$`)

// v1Path is the v1 field of the v1beta1 field path of p (see docs/migration.md).
func v1Path(path string, p *pipelinev1.Pipeline) string {
	if m := argPath.FindStringSubmatch(path); m != nil {
		if m[3] == pipelinev1.ListenPortArg {
			return m[1] + ".port" + m[4]
		}
		return m[1] + ".env" + m[2] + m[4]
	}
	if rest, ok := strings.CutPrefix(path, "spec.router"); ok {
		if rest == ".enabled" {
			return "spec.dataPath.mode"
		}
		return "spec.dataPath.router" + rest
	}
	rest, ok := strings.CutPrefix(path, "spec.modelStorage.")
	if !ok {
		return path
	}
	storage := "spec.modelStorage."
	member := v1StorageMember(p.Spec.ModelStorage.EffectiveType())
	field, tail, _ := strings.Cut(rest, "[")
	if tail != "" {
		tail = "[" + tail
	}
	switch field {
	case "storageClassName":
		return storage + "storageClass.name" + tail
	case "claimName":
		return storage + "existingClaim.name" + tail
	case "modelStorageClassName":
		return storage + "modelStorageClass.name" + tail
	case "capacity", "accessModes":
		if member == "" {
			return path
		}
		return storage + member + "." + field + tail
	case "csiParameter":
		return storage + v1CSIParameter(member, tail)
	}
	return path
}

// v1StorageMember is the member of v1's storage union for a storage type, empty for none.
func v1StorageMember(t pipelinev1.StorageType) string {
	switch t {
	case pipelinev1.StorageTypeNFS:
		return "nfs"
	case pipelinev1.StorageTypeCSI:
		return "csi"
	case pipelinev1.StorageTypeStorageClass:
		return "storageClass"
	case pipelinev1.StorageTypeExistingClaim:
		return "existingClaim"
	case pipelinev1.StorageTypeModelStorageClass:
		return "modelStorageClass"
	}
	return ""
}

// v1CSIParameter is the v1 field of csiParameter<key> (key as "[server]", or empty for the map).
func v1CSIParameter(member, key string) string {
	switch {
	case member == "nfs" && key == "[server]":
		return "nfs.server"
	case member == "nfs" && key == "[share]":
		return "nfs.path"
	case member == "csi" && key == "[driver]":
		return "csi.driver"
	case member == "csi":
		return "csi.volumeAttributes" + key
	case member != "":
		return member
	}
	return "csiParameter" + key
}
