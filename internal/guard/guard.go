// Package guard holds the guard webhook: it admits the Services and PersistentVolumes that the
// operator's own ServiceAccount writes only as the Pipeline they belong to asks for them. The
// admission policies of config/policy bind that identity to what any Pipeline could ask for; they
// cannot read the Pipeline. This webhook can: a stolen operator token gets a NodePort or
// LoadBalancer Service only for a Pipeline whose expose asks for one, a Service that selects only
// the pods the Pipeline's builders select, and a PersistentVolume only of the source the
// Pipeline's storage (or the ModelStorageClass it names, where that class selects the namespace)
// gives, under the names the operator gives volumes, reserved for the Pipeline's own claim.
//
// The webhook configuration (config/policy/guard-webhook.yaml) sends it only the operator's own
// requests (matchConditions on the requester), so that no other write of a Service or volume in
// the cluster waits on the operator.
//
// Any caller that reaches the webhook port may send it a review, in any requester's name. So a
// refusal tells the caller only what of its own request was refused, never what the Pipeline
// holds: a Pipeline is named "not found" alike whether it is missing or the request does not
// carry what only a reader of it knows (its uid, its volume's name, which hashes its storage).
// What the Pipeline asks for instead goes to the manager's log, beside the review's uid.
package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
)

// Path is where the manager serves the guard webhook.
const Path = "/validate-operator-writes"

// Guard is the admission handler of the guard webhook.
type Guard struct {
	// Cached reads Pipelines first: the manager's cache. Live reads a Pipeline again when the
	// cache has none or one the request does not match (the controller may have acted on a
	// newer version than this replica's cache holds), and ModelStorageClasses and Namespaces.
	Cached, Live client.Reader
}

var _ admission.Handler = &Guard{}

// NewWebhook is the guard webhook of mgr: it reads Pipelines from mgr's cache, and from the
// apiserver through its API reader.
func NewWebhook(mgr manager.Manager) *admission.Webhook {
	return &admission.Webhook{Handler: &Guard{Cached: mgr.GetCache(), Live: mgr.GetAPIReader()}, RecoverPanic: ptr.To(true)}
}

// Handle admits a create or update of a Service or PersistentVolume as its Pipeline asks for it.
// An update that leaves what is checked as it was is admitted without reading the Pipeline, so
// that the operator can still update (or release) what a Pipeline that is gone left behind.
func (g *Guard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var (
		r   *refusal
		err error
	)
	switch req.Resource.Group + "/" + req.Resource.Resource {
	case "/services":
		var svc, old corev1.Service
		if err := decode(req, &svc, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if req.Operation == admissionv1.Update && sameService(&svc, &old) {
			return admission.Allowed("")
		}
		r, err = g.checkService(ctx, &svc)
	case "/persistentvolumes":
		var pv, old corev1.PersistentVolume
		if err := decode(req, &pv, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if req.Operation == admissionv1.Update && sameVolume(&pv, &old) {
			return admission.Allowed("")
		}
		r, err = g.checkVolume(ctx, &pv)
	default:
		return admission.Allowed("")
	}
	switch {
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	case r != nil:
		if r.asked != "" {
			logf.FromContext(ctx).Info("Refused a write of the operator's identity", "refusal", r.told, "asked", r.asked)
		}
		return admission.Denied("the operator writes a Service or PersistentVolume only as its Pipeline asks: " + r.told)
	}
	return admission.Allowed("")
}

// refusal is why the guard refuses a write: told, to the caller, names only what the request
// carries; asked, for the manager's log only, what the Pipeline asks for instead.
type refusal struct {
	told, asked string
}

func refuse(format string, args ...any) *refusal {
	return &refusal{told: fmt.Sprintf(format, args...)}
}

// asking is r with what the Pipeline asks for instead.
func (r refusal) asking(format string, args ...any) *refusal {
	r.asked = fmt.Sprintf(format, args...)
	return &r
}

// decode reads the request's object into obj and, for an update, its old object into old.
func decode(req admission.Request, obj, old any) error {
	if err := json.Unmarshal(req.Object.Raw, obj); err != nil {
		return fmt.Errorf("decode the %s: %w", req.Kind.Kind, err)
	}
	if req.Operation == admissionv1.Update {
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return fmt.Errorf("decode the stored %s: %w", req.Kind.Kind, err)
		}
	}
	return nil
}

// sameService reports whether an update leaves what the guard checks of a Service as it was.
func sameService(svc, old *corev1.Service) bool {
	return serviceType(svc) == serviceType(old) && maps.Equal(svc.Spec.Selector, old.Spec.Selector) &&
		controller(svc) == controller(old)
}

// sameVolume reports whether an update leaves what the guard checks of a PersistentVolume as it
// was.
func sameVolume(pv, old *corev1.PersistentVolume) bool {
	return equality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, old.Spec.PersistentVolumeSource) &&
		slices.Equal(pv.Spec.MountOptions, old.Spec.MountOptions) && claim(pv) == claim(old) &&
		pv.Labels[resources.LabelPipeline] == old.Labels[resources.LabelPipeline] &&
		pv.Labels[resources.LabelPipelineNamespace] == old.Labels[resources.LabelPipelineNamespace]
}

func serviceType(svc *corev1.Service) corev1.ServiceType {
	if svc.Spec.Type == "" {
		return corev1.ServiceTypeClusterIP
	}
	return svc.Spec.Type
}

// controller is the Pipeline that controls obj: its name and uid, empty when none does.
func controller(obj metav1.Object) metav1.OwnerReference {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != "Pipeline" || ref.APIVersion != pipelinev1.GroupVersion.String() {
		return metav1.OwnerReference{}
	}
	return metav1.OwnerReference{Name: ref.Name, UID: ref.UID}
}

// claim is the claim a volume is reserved for, "namespace/name" (empty: none).
func claim(pv *corev1.PersistentVolume) string {
	if r := pv.Spec.ClaimRef; r != nil {
		return r.Namespace + "/" + r.Name
	}
	return ""
}

// checkService is why svc is not a Service its Pipeline asks for (nil: it is).
func (g *Guard) checkService(ctx context.Context, svc *corev1.Service) (*refusal, error) {
	ref := controller(svc)
	if ref.Name == "" {
		return refuse("the operator's Service %s is controlled by no Pipeline", svc.Name), nil
	}
	key := types.NamespacedName{Namespace: svc.Namespace, Name: ref.Name}
	notFound := refuse("Service %s is controlled by Pipeline %s of uid %s, which does not exist", svc.Name, key, ref.UID)
	return g.withPipeline(ctx, key, ref.UID, notFound,
		func(p *pipelinev1.Pipeline) (*refusal, error) { return serviceRefusal(p, svc), nil })
}

// serviceRefusal is why svc is not one of the Services p's builders make (nil: it is).
func serviceRefusal(p *pipelinev1.Pipeline, svc *corev1.Service) *refusal {
	var want []*corev1.Service
	for i := range p.Spec.Steps {
		want = append(want, resources.Convert[corev1.Service](resources.StepService(p, i)))
	}
	if resources.RouterEnabled(p) {
		want = append(want, resources.Convert[corev1.Service](resources.RouterService(p)))
	}
	i := slices.IndexFunc(want, func(w *corev1.Service) bool { return w.Name == svc.Name })
	if i < 0 {
		return refuse("Pipeline %s/%s makes no Service named %s", p.Namespace, p.Name, svc.Name)
	}
	w := want[i]
	if serviceType(svc) != serviceType(w) {
		return refuse("Service %s of Pipeline %s/%s is of type %s, which its spec does not ask for (expose.serviceType)",
			svc.Name, p.Namespace, p.Name, serviceType(svc)).asking("type %s", serviceType(w))
	}
	if !maps.Equal(svc.Spec.Selector, w.Spec.Selector) {
		return refuse("Service %s of Pipeline %s/%s selects the pods %v, which are not its step's",
			svc.Name, p.Namespace, p.Name, svc.Spec.Selector).asking("selector %v", w.Spec.Selector)
	}
	return nil
}

// checkVolume is why pv is not the model volume of the Pipeline its labels name (nil: it is).
func (g *Guard) checkVolume(ctx context.Context, pv *corev1.PersistentVolume) (*refusal, error) {
	key := types.NamespacedName{Namespace: pv.Labels[resources.LabelPipelineNamespace], Name: pv.Labels[resources.LabelPipeline]}
	if key.Namespace == "" || key.Name == "" {
		return refuse("the operator's PersistentVolume %s names no Pipeline (labels %s and %s)",
			pv.Name, resources.LabelPipelineNamespace, resources.LabelPipeline), nil
	}
	// One answer whether the Pipeline is missing, has no volume of the operator's or one of
	// another name: the name hashes the storage, which the caller must not learn here.
	notFound := refuse("PersistentVolume %s is the model volume of no Pipeline %s", pv.Name, key)
	return g.withPipeline(ctx, key, "", notFound, func(p *pipelinev1.Pipeline) (*refusal, error) {
		if !resources.OwnsVolume(p) || pv.Name != resources.PVName(p) && pv.Name != resources.LegacyPVName(p) {
			return notFound.asking("storage %s, volume %s", resources.StorageType(p), resources.PVName(p)), nil
		}
		return g.volumeRefusal(ctx, p, pv)
	})
}

// volumeRefusal is why pv, of the name of p's model volume, is not the volume p's storage makes
// (nil: it is).
func (g *Guard) volumeRefusal(ctx context.Context, p *pipelinev1.Pipeline, pv *corev1.PersistentVolume) (*refusal, error) {
	of := fmt.Sprintf("the model volume %s of Pipeline %s/%s", pv.Name, p.Namespace, p.Name)
	src := resources.InlineVolumeSource(p)
	if name := resources.ModelStorageClassName(p); name != "" {
		class := &pipelinev1.ModelStorageClass{}
		switch err := g.Live.Get(ctx, types.NamespacedName{Name: name}, class); {
		case apierrors.IsNotFound(err):
			return refuse("the ModelStorageClass of %s does not exist", of).asking("class %s", name), nil
		case err != nil:
			return nil, fmt.Errorf("get ModelStorageClass %s: %w", name, err)
		}
		ns := &corev1.Namespace{}
		if err := g.Live.Get(ctx, types.NamespacedName{Name: p.Namespace}, ns); err != nil {
			return nil, fmt.Errorf("get namespace %s: %w", p.Namespace, err)
		}
		if ok, _ := class.Selects(ns.Labels); !ok {
			return refuse("the ModelStorageClass of %s does not select namespace %s", of, p.Namespace).asking("class %s", name), nil
		}
		src = resources.ClassVolumeSource(class)
	}
	want := resources.Convert[corev1.PersistentVolume](resources.PV(p, pv.Name, src))
	if !equality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, want.Spec.PersistentVolumeSource) {
		return refuse("%s has the source %s, which its storage does not give", of, describeSource(pv)).
			asking("source %s", describeSource(want)), nil
	}
	if !slices.Equal(pv.Spec.MountOptions, want.Spec.MountOptions) {
		return refuse("%s has the mount options %q, which its storage does not give", of, pv.Spec.MountOptions).
			asking("mount options %q", want.Spec.MountOptions), nil
	}
	if claim(pv) != claim(want) {
		return refuse("%s is reserved for %q, which is not its claim", of, claim(pv)).asking("claim %s", claim(want)), nil
	}
	return nil, nil
}

// describeSource names pv's source in a refusal.
func describeSource(pv *corev1.PersistentVolume) string {
	switch s := pv.Spec.PersistentVolumeSource; {
	case s.NFS != nil:
		return fmt.Sprintf("NFS %s:%s, readOnly %t", s.NFS.Server, s.NFS.Path, s.NFS.ReadOnly)
	case s.CSI != nil:
		return fmt.Sprintf("CSI driver %s, volume handle %s, readOnly %t, attributes %v, fsType %q",
			s.CSI.Driver, s.CSI.VolumeHandle, s.CSI.ReadOnly, s.CSI.VolumeAttributes, s.CSI.FSType)
	}
	return "another kind of source"
}

// withPipeline runs check on the Pipeline key (of uid, unless empty) and returns its refusal: on
// the cached Pipeline, and again on the apiserver's when the cache has none, another uid, or one
// check refuses. A Pipeline that does not exist (or is of another uid) is refused as notFound.
func (g *Guard) withPipeline(ctx context.Context, key types.NamespacedName, uid types.UID, notFound *refusal,
	check func(*pipelinev1.Pipeline) (*refusal, error)) (*refusal, error) {
	var r *refusal
	for _, reader := range []client.Reader{g.Cached, g.Live} {
		if reader == nil {
			continue
		}
		p := &pipelinev1.Pipeline{}
		err := reader.Get(ctx, key, p)
		switch {
		case apierrors.IsNotFound(err), err == nil && uid != "" && p.UID != uid:
			r = notFound
			continue
		case err != nil:
			return nil, fmt.Errorf("get Pipeline %s: %w", key, err)
		}
		if r, err = check(p); err != nil || r == nil {
			return nil, err
		}
	}
	return r, nil
}
