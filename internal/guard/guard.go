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
		denial string
		err    error
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
		denial, err = g.checkService(ctx, &svc)
	case "/persistentvolumes":
		var pv, old corev1.PersistentVolume
		if err := decode(req, &pv, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if req.Operation == admissionv1.Update && sameVolume(&pv, &old) {
			return admission.Allowed("")
		}
		denial, err = g.checkVolume(ctx, &pv)
	default:
		return admission.Allowed("")
	}
	switch {
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	case denial != "":
		return admission.Denied(denial)
	}
	return admission.Allowed("")
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

// checkService is why svc is not a Service its Pipeline asks for (empty: it is).
func (g *Guard) checkService(ctx context.Context, svc *corev1.Service) (string, error) {
	ref := controller(svc)
	if ref.Name == "" {
		return fmt.Sprintf("the operator's Service %s is controlled by no Pipeline", svc.Name), nil
	}
	return g.withPipeline(ctx, types.NamespacedName{Namespace: svc.Namespace, Name: ref.Name}, ref.UID,
		func(p *pipelinev1.Pipeline) (string, error) { return serviceDenial(p, svc), nil })
}

// serviceDenial is why svc is not one of the Services p's builders make (empty: it is).
func serviceDenial(p *pipelinev1.Pipeline, svc *corev1.Service) string {
	var want []*corev1.Service
	for i := range p.Spec.Steps {
		want = append(want, resources.Convert[corev1.Service](resources.StepService(p, i)))
	}
	if resources.RouterEnabled(p) {
		want = append(want, resources.Convert[corev1.Service](resources.RouterService(p)))
	}
	i := slices.IndexFunc(want, func(w *corev1.Service) bool { return w.Name == svc.Name })
	if i < 0 {
		return fmt.Sprintf("Pipeline %s/%s makes no Service named %s", p.Namespace, p.Name, svc.Name)
	}
	w := want[i]
	if serviceType(svc) != serviceType(w) {
		return fmt.Sprintf("Service %s of Pipeline %s/%s is of type %s, as its spec asks (expose.serviceType), not %s",
			svc.Name, p.Namespace, p.Name, serviceType(w), serviceType(svc))
	}
	if !maps.Equal(svc.Spec.Selector, w.Spec.Selector) {
		return fmt.Sprintf("Service %s of Pipeline %s/%s selects the pods %v, not %v",
			svc.Name, p.Namespace, p.Name, w.Spec.Selector, svc.Spec.Selector)
	}
	return ""
}

// checkVolume is why pv is not the model volume of the Pipeline its labels name (empty: it is).
func (g *Guard) checkVolume(ctx context.Context, pv *corev1.PersistentVolume) (string, error) {
	key := types.NamespacedName{Namespace: pv.Labels[resources.LabelPipelineNamespace], Name: pv.Labels[resources.LabelPipeline]}
	if key.Namespace == "" || key.Name == "" {
		return fmt.Sprintf("the operator's PersistentVolume %s names no Pipeline (labels %s and %s)",
			pv.Name, resources.LabelPipelineNamespace, resources.LabelPipeline), nil
	}
	return g.withPipeline(ctx, key, "", func(p *pipelinev1.Pipeline) (string, error) { return g.volumeDenial(ctx, p, pv) })
}

// volumeDenial is why pv is not the model volume p's storage makes (empty: it is).
func (g *Guard) volumeDenial(ctx context.Context, p *pipelinev1.Pipeline, pv *corev1.PersistentVolume) (string, error) {
	of := fmt.Sprintf("Pipeline %s/%s", p.Namespace, p.Name)
	if !resources.OwnsVolume(p) {
		return fmt.Sprintf("the storage of %s (type %s) has no volume made by the operator", of, resources.StorageType(p)), nil
	}
	if pv.Name != resources.PVName(p) && pv.Name != resources.LegacyPVName(p) {
		return fmt.Sprintf("the model volume of %s is named %s, not %s", of, resources.PVName(p), pv.Name), nil
	}
	src := resources.InlineVolumeSource(p)
	if name := resources.ModelStorageClassName(p); name != "" {
		class := &pipelinev1.ModelStorageClass{}
		switch err := g.Live.Get(ctx, types.NamespacedName{Name: name}, class); {
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("ModelStorageClass %s named by %s does not exist", name, of), nil
		case err != nil:
			return "", fmt.Errorf("get ModelStorageClass %s: %w", name, err)
		}
		ns := &corev1.Namespace{}
		if err := g.Live.Get(ctx, types.NamespacedName{Name: p.Namespace}, ns); err != nil {
			return "", fmt.Errorf("get namespace %s: %w", p.Namespace, err)
		}
		if ok, _ := class.Selects(ns.Labels); !ok {
			return fmt.Sprintf("ModelStorageClass %s named by %s does not select namespace %s", name, of, p.Namespace), nil
		}
		src = resources.ClassVolumeSource(class)
	}
	want := resources.Convert[corev1.PersistentVolume](resources.PV(p, pv.Name, src))
	if !equality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, want.Spec.PersistentVolumeSource) {
		return fmt.Sprintf("the model volume %s of %s has the source its storage gives (%s), not %s",
			pv.Name, of, describeSource(want), describeSource(pv)), nil
	}
	if !slices.Equal(pv.Spec.MountOptions, want.Spec.MountOptions) {
		return fmt.Sprintf("the model volume %s of %s has the mount options %q, not %q",
			pv.Name, of, want.Spec.MountOptions, pv.Spec.MountOptions), nil
	}
	if claim(pv) != claim(want) {
		return fmt.Sprintf("the model volume %s of %s is reserved for its claim %s, not %q", pv.Name, of, claim(want), claim(pv)), nil
	}
	return "", nil
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

// withPipeline runs check on the Pipeline key (of uid, unless empty) and returns its denial: on
// the cached Pipeline, and again on the apiserver's when the cache has none, another uid, or one
// check denies. A Pipeline that does not exist is a denial.
func (g *Guard) withPipeline(ctx context.Context, key types.NamespacedName, uid types.UID,
	check func(*pipelinev1.Pipeline) (string, error)) (string, error) {
	var denial string
	for _, r := range []client.Reader{g.Cached, g.Live} {
		if r == nil {
			continue
		}
		p := &pipelinev1.Pipeline{}
		err := r.Get(ctx, key, p)
		switch {
		case apierrors.IsNotFound(err), err == nil && uid != "" && p.UID != uid:
			denial = fmt.Sprintf("Pipeline %s (uid %s) does not exist", key, uid)
			if uid == "" {
				denial = fmt.Sprintf("Pipeline %s does not exist", key)
			}
			continue
		case err != nil:
			return "", fmt.Errorf("get Pipeline %s: %w", key, err)
		}
		if denial, err = check(p); err != nil || denial == "" {
			return "", err
		}
	}
	return "the operator writes a Service or PersistentVolume only as its Pipeline asks: " + denial, nil
}
