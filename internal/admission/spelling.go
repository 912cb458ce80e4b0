package admission

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// A request made in an earlier version of the API reaches these webhooks converted to v1 (they
// are registered for v1 with matchPolicy Equivalent). Their checks then find a v1 field; the
// Spelling of the request's version renames it to the field the requester wrote, so that a
// refusal or a warning names what is in their manifest. The operator gives the webhooks the
// spellings of the versions it converts (SetupPipelineWebhookWithManager).

// Spelling names a Pipeline's fields and values as an earlier API version writes them.
type Spelling interface {
	// Path is the field, of the v1 field path v1Path, of p (the request's object converted to v1).
	Path(v1Path string, p *pipelinev1.Pipeline) string
	// StorageType is the version's name of a storage type.
	StorageType(t pipelinev1.ModelStorageType) string
	// RouterForInputs says, in the version's terms, that a step's inputs need the router.
	RouterForInputs() string
}

// fieldNames spells the fields and values that refusals and warnings name, for the version the
// request was made in. The zero value spells them in v1.
type fieldNames struct {
	// spelling is that of the request's version; nil for v1.
	spelling Spelling
	// p is the Pipeline of the request, converted to v1.
	p *pipelinev1.Pipeline
}

// namesFor is the spelling for the request of ctx about p: that of the request's version among
// spellings (by version), v1's otherwise.
func namesFor(ctx context.Context, p *pipelinev1.Pipeline, spellings map[string]Spelling) fieldNames {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.RequestKind == nil || spellings[req.RequestKind.Version] == nil {
		return fieldNames{}
	}
	return fieldNames{spelling: spellings[req.RequestKind.Version], p: p}
}

// path is the field path, written with the v1 path v1Path, in the request's version.
func (n fieldNames) path(v1Path string) string {
	if n.spelling == nil {
		return v1Path
	}
	return n.spelling.Path(v1Path, n.p)
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
	if n.spelling == nil {
		return "the router makes a step's request of its inputs: set dataPath.mode to Router, or remove inputs"
	}
	return n.spelling.RouterForInputs()
}

// storageType spells the storage type t in the request's version.
func (n fieldNames) storageType(t pipelinev1.ModelStorageType) string {
	if n.spelling == nil {
		return string(t)
	}
	return n.spelling.StorageType(t)
}
