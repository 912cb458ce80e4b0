// Package admission holds the admission webhooks of the distri-infer.ndsl.cn Pipeline: for v1,
// a defaulting webhook that writes every default into the spec and a validating webhook for the
// checks the CRD schema and its CEL rules cannot express; and the conversion webhook between v1
// (the hub) and v1beta1. Both admission webhooks are registered for v1 with matchPolicy
// Equivalent, so a v1beta1 request reaches them converted to v1; their refusals and warnings then
// name the v1beta1 fields the requester wrote, by the Spelling the operator gives them for
// v1beta1 (spelling.go; api/v1beta1's FieldSpelling).
package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/nodes"
)

// SetupPipelineWebhookWithManager registers the defaulting and validating webhooks of Pipeline
// with the manager's webhook server. nodes reads Nodes for the location warnings: the manager's
// cache, which holds whole Nodes stripped to what placement reads (labels, cordon, taints, Ready)
// and indexes them by hostname once the Pipeline controller is set up on the same manager
// (nodes.SetupIndexes); a reader without that index is asked with a label selector. The
// manager's client asks the apiserver whether the requester may create the PersistentVolume an
// inline storage source stands for (SubjectAccessReviews, an allowing answer reused for
// DefaultAccessValidity); its API reader reads the
// ModelStorageClass a Pipeline names and the labels of the Pipeline's namespace, fresh. operator
// is the user name of the operator's own identity (Validator.Operator; empty: none). spellings
// name the fields for requests made in earlier versions (Validator.Spellings).
func SetupPipelineWebhookWithManager(mgr ctrl.Manager, nodes client.Reader, operator string, spellings map[string]Spelling) error {
	return ctrl.NewWebhookManagedBy(mgr, &pipelinev1.Pipeline{}).
		WithDefaulter(&Defaulter{}).
		WithValidator(&Validator{Nodes: nodes, Reviews: mgr.GetClient(), Access: NewAccessCache(DefaultAccessValidity),
			Classes: mgr.GetAPIReader(), Operator: operator, Spellings: spellings}).
		Complete()
}

// +kubebuilder:webhook:path=/mutate-distri-infer-ndsl-cn-v1-pipeline,mutating=true,failurePolicy=fail,sideEffects=None,groups=distri-infer.ndsl.cn,resources=pipelines,verbs=create;update,versions=v1,name=mpipeline.distri-infer.ndsl.cn,admissionReviewVersions=v1,matchPolicy=Equivalent

// Defaulter writes the defaults of a Pipeline into its spec, so that the stored resource shows
// what the operator does: the steps' replicas and ports, the router's replicas, the failover
// settings, and the storage's capacity, access modes and mount path (pipelinev1.Pipeline.Default).
// A new Pipeline gets the operator's finalizer too.
type Defaulter struct{}

// Default implements admission.Defaulter. On an update, a port that was the value of the step's
// environment variable pipelinev1.ListenPortEnv follows a new value of that variable, so that
// editing the variable alone is enough, as editing v1beta1's args.listenPort was.
//
// On a create, it adds pipelinev1.CleanupFinalizer, which the operator would otherwise add with
// a write of its own (and another pass through these webhooks) before making anything. Never on
// an update: whoever removes the finalizer from a Pipeline, by hand, keeps it removed.
func (*Defaulter) Default(ctx context.Context, p *pipelinev1.Pipeline) error {
	req, reqErr := admission.RequestFromContext(ctx)
	if reqErr == nil && req.Operation == admissionv1.Create {
		controllerutil.AddFinalizer(p, pipelinev1.CleanupFinalizer)
	}
	if reqErr == nil && req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old := &pipelinev1.Pipeline{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return fmt.Errorf("decode the stored Pipeline: %w", err)
		}
		followListenPort(old, p)
	}
	p.Default()
	return nil
}

// followListenPort gives every step of p whose port, in old, was the value of its env entry
// pipelinev1.ListenPortEnv the new value of that entry as its port, when only the entry changed
// and its new value is a port number.
func followListenPort(old, p *pipelinev1.Pipeline) {
	before := map[string]*pipelinev1.Step{}
	for i := range old.Spec.Steps {
		before[old.Spec.Steps[i].Name] = &old.Spec.Steps[i]
	}
	for i := range p.Spec.Steps {
		s, was := &p.Spec.Steps[i], before[p.Spec.Steps[i].Name]
		if was == nil || was.Port == nil || s.Port == nil || *s.Port != *was.Port {
			continue
		}
		oldValue, hadEnv := envValue(was.Env, pipelinev1.ListenPortEnv)
		newValue, hasEnv := envValue(s.Env, pipelinev1.ListenPortEnv)
		if !hadEnv || !hasEnv || oldValue == newValue || strconv.Itoa(int(*was.Port)) != oldValue {
			continue
		}
		if port, err := strconv.ParseInt(newValue, 10, 32); err == nil && port >= 1 && port <= 65535 {
			s.Port = ptr.To(int32(port))
		}
	}
}

// envValue is the value of the env entry called name, and whether there is one.
func envValue(env []corev1.EnvVar, name string) (string, bool) {
	for _, e := range env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// +kubebuilder:webhook:path=/validate-distri-infer-ndsl-cn-v1-pipeline,mutating=false,failurePolicy=fail,sideEffects=None,groups=distri-infer.ndsl.cn,resources=pipelines,verbs=create;update,versions=v1,name=vpipeline.distri-infer.ndsl.cn,admissionReviewVersions=v1,matchPolicy=Equivalent
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Validator refuses Pipelines the operator could only half build, with a message that names
// the field and says what to change, and warns about things that may be fine later.
type Validator struct {
	// Nodes reads Nodes (by name, and by their kubernetes.io/hostname label) for the warning
	// about a location no node has yet; nil turns that warning off.
	Nodes client.Reader
	// Reviews creates the SubjectAccessReviews that check the requester of an inline storage
	// source (see storageAccess); nil turns that check off.
	Reviews client.Client
	// Access keeps the reviews that allowed a requester for a while; nil keeps none.
	Access *AccessCache
	// Classes reads ModelStorageClasses and Namespaces, to check that the class a Pipeline's
	// storage names is published to its namespace (see modelStorageClassAccess); nil turns that
	// check off.
	Classes client.Reader
	// Operator is the user name of the operator's own identity (its ServiceAccount). Its updates
	// of a Pipeline change the spec only as the defaults do, or clear spec.failover.failbackNow
	// once it failed back: a stolen operator token cannot make a Pipeline ask for another
	// storage source or exposure, which the operator would then make. Empty: not checked.
	Operator string
	// Spellings name the fields and values of refusals and warnings for requests made in an
	// earlier API version, by version; a request in a version without one gets v1's.
	Spellings map[string]Spelling
}

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(ctx context.Context, p *pipelinev1.Pipeline) (admission.Warnings, error) {
	return v.validate(ctx, p, nil)
}

// ValidateUpdate implements admission.Validator.
func (v *Validator) ValidateUpdate(ctx context.Context, old, p *pipelinev1.Pipeline) (admission.Warnings, error) {
	if req, err := admission.RequestFromContext(ctx); err == nil && v.Operator != "" && req.UserInfo.Username == v.Operator {
		if err := operatorSpecChange(old, p); err != nil {
			return nil, err
		}
	}
	if !p.DeletionTimestamp.IsZero() {
		// A Pipeline being deleted only loses its finalizer: never block that.
		return nil, nil
	}
	if equality.Semantic.DeepEqual(checkedSpec(old), checkedSpec(p)) {
		// Labels, annotations, finalizers, a pause or a failback request: a Pipeline stored
		// before a check existed can still be paused, labelled or finalized, and the operator
		// can still clear failbackNow.
		return nil, nil
	}
	return v.validate(ctx, p, old)
}

// operatorSpecChange refuses an update by the operator's identity that changes p's spec from
// old's otherwise than by the defaults (which the defaulting webhook wrote into p) or by
// clearing spec.failover.failbackNow.
func operatorSpecChange(old, p *pipelinev1.Pipeline) error {
	want := old.DeepCopy()
	want.Default()
	if f := p.Spec.Failover; f != nil && f.FailbackNow == nil && want.Spec.Failover != nil {
		want.Spec.Failover.FailbackNow = nil
	}
	if equality.Semantic.DeepEqual(want.Spec, p.Spec) {
		return nil
	}
	return apierrors.NewForbidden(pipelinev1.GroupVersion.WithResource("pipelines").GroupResource(), p.Name,
		fmt.Errorf("the operator's identity changes no Pipeline's spec (only its defaults, and it clears spec.failover.failbackNow): "+
			"what a Pipeline asks for is its author's to write"))
}

// checkedSpec is the spec of p whose change an update is checked for: without spec.paused and
// spec.failover.failbackNow, which ask the operator to stop or to fail back now (v1beta1 says
// them with annotations).
func checkedSpec(p *pipelinev1.Pipeline) pipelinev1.PipelineSpec {
	spec := *p.Spec.DeepCopy()
	spec.Paused = nil
	if spec.Failover != nil {
		spec.Failover.FailbackNow = nil
	}
	return spec
}

// ValidateDelete implements admission.Validator; deletion is always allowed.
func (*Validator) ValidateDelete(context.Context, *pipelinev1.Pipeline) (admission.Warnings, error) {
	return nil, nil
}

func (v *Validator) validate(ctx context.Context, p, old *pipelinev1.Pipeline) (admission.Warnings, error) {
	names := namesFor(ctx, p, v.Spellings)
	errs := validatePipeline(p, old, names)
	if old != nil {
		errs = append(errs, validatePipelineUpdate(old, p, names)...)
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(pipelinev1.GroupVersion.WithKind("Pipeline").GroupKind(), p.Name, names.errors(firstErrors(errs)))
	}
	// Who may ask for the storage is checked when it is asked for: on create, and when it
	// changes (a tenant may still edit the rest of a Pipeline an administrator made).
	if old == nil || storageChanged(old, p) {
		if err := v.storageAccess(ctx, p, names); err != nil {
			return nil, err
		}
		if err := v.modelStorageClassAccess(ctx, p, names); err != nil {
			return nil, err
		}
	}
	return append(warnings(p, old, v.nodeExists(ctx), names), autoscalingRemovedWarnings(p, old)...), nil
}

// nodeExists looks a location up among the nodes' names and kubernetes.io/hostname labels, as
// the operator resolves it to the node the step is pinned to (nodes.Resolve).
func (v *Validator) nodeExists(ctx context.Context) func(string) (bool, error) {
	if v.Nodes == nil {
		return nil
	}
	return func(location string) (bool, error) { return nodes.Exists(ctx, v.Nodes, location) }
}

// MaxFieldErrors bounds the field errors of one refusal: their message is built in time that
// grows with its length, and a person fixes the first ones first.
const MaxFieldErrors = 64

// firstErrors is errs, the errors after the first MaxFieldErrors replaced by one that counts them.
func firstErrors(errs field.ErrorList) field.ErrorList {
	if len(errs) <= MaxFieldErrors {
		return errs
	}
	first := slices.Clip(errs[:MaxFieldErrors])
	return append(first, field.Forbidden(field.NewPath("spec"),
		fmt.Sprintf("%d more errors not listed: fix the ones above and try again", len(errs)-MaxFieldErrors)))
}
