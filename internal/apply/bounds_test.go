package apply

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// created is the child a describes as the apiserver returns it after the operator's create: the
// applied content, and the create's managedFields, which own every field of it.
func created(t *testing.T, a *appliedObject) client.Object {
	t.Helper()
	obj, err := clientgoscheme.Scheme.New(a.unstructured().GroupVersionKind())
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(a.content, obj); err != nil {
		t.Fatal(err)
	}
	typed, err := typeConverter().ObjectToTyped(a.unstructured())
	if err != nil {
		t.Fatal(err)
	}
	fields, err := typed.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := fields.ToJSON()
	if err != nil {
		t.Fatal(err)
	}
	live := obj.(client.Object)
	live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsV1: metav1.NewFieldsV1(string(raw))}})
	return live
}

// pad writes into the metadata of obj what anyone who may edit it can: big annotations and
// labels of their own, owner references and finalizers, and on a Deployment's pods the same.
func pad(obj client.Object) {
	big := strings.Repeat("x", 200<<10)
	annotations := map[string]string{"tenant.example.com/padding": big,
		// The operator's key with a value longer than any it writes.
		AnnotationAppliedHash + "-not": "x"}
	for k, v := range obj.GetAnnotations() {
		annotations[k] = v
	}
	labels := map[string]string{}
	for i := range 500 {
		labels[fmt.Sprintf("tenant.example.com/label-%d", i)] = strings.Repeat("y", 63)
	}
	for k, v := range obj.GetLabels() {
		labels[k] = v
	}
	obj.SetAnnotations(annotations)
	obj.SetLabels(labels)
	obj.SetOwnerReferences(append(obj.GetOwnerReferences(),
		metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: big[:253], UID: "u"}))
	obj.SetFinalizers([]string{"tenant.example.com/" + big[:200]})
	if d, ok := obj.(*appsv1.Deployment); ok {
		podAnnotations := map[string]string{"kubectl.kubernetes.io/restartedAt": big, resources.AnnotationRouterConfigHash + "x": "x"}
		for k, v := range d.Spec.Template.Annotations {
			podAnnotations[k] = v
		}
		d.Spec.Template.Annotations = podAnnotations
		for k, v := range d.Spec.Template.Labels {
			labels[k] = v
		}
		d.Spec.Template.Labels = labels
	}
}

// What anyone writes into the metadata of a child, the cache does not keep: the child is cached
// as it would be without it, and stays up to date with what the operator applied.
func TestTransformsKeepNoMetadataOfOthers(t *testing.T) {
	for _, desired := range everyChild(t) {
		a := must(newAppliedObject(desired))
		name := a.unstructured().GetKind() + " " + a.unstructured().GetName()
		transform := transformOf(t, created(t, a))
		want, err := transform(created(t, a))
		if err != nil {
			t.Fatal(err)
		}
		padded := created(t, a)
		pad(padded)
		got, err := transform(padded)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: padded metadata cached as\n%+v\nwant\n%+v", name, got, want)
		}
		if ok, err := a.upToDate(got.(client.Object)); err != nil || !ok {
			t.Errorf("%s: the padded child no longer matches what was applied (up to date %v, %v)", name, ok, err)
		}
		if IsSummary(got.(client.Object)) {
			t.Errorf("%s: summarized although only others' metadata was large", name)
		}
	}
}

// An annotation under one of the operator's keys with a longer value than the operator writes
// is not the operator's: dropped, the child is out of date and the next apply writes the
// operator's value back.
func TestTransformsDropOwnAnnotationsLongerThanWritten(t *testing.T) {
	p := testenv.Sample(t, "default")
	a := must(newAppliedObject(resources.StepService(p, 0)))
	svc := created(t, a)
	svc.SetAnnotations(map[string]string{AnnotationAppliedHash: strings.Repeat("0", 1<<20)})
	cached, err := transformOf(t, svc)(svc)
	if err != nil {
		t.Fatal(err)
	}
	if a := cached.(client.Object).GetAnnotations(); a != nil {
		t.Errorf("cached annotations %d, want none", len(a))
	}
	if ok, _ := a.upToDate(cached.(client.Object)); ok {
		t.Error("a child whose applied hash was replaced is taken as up to date")
	}
}

// A controller reference that no Pipeline could have written does not make an object a child.
func TestTransformsKeepOnlyTheIdentityOfImplausibleControllers(t *testing.T) {
	long := strings.Repeat("a", 64)
	for name, ref := range map[string]metav1.OwnerReference{
		"a name longer than a Pipeline's": {APIVersion: pipelinev1.GroupVersion.String(), Kind: "Pipeline", Name: long, UID: "u"},
		"a long API version":              {APIVersion: pipelinev1.GroupVersion.Group + "/" + long, Kind: "Pipeline", Name: "p", UID: "u"},
		"a long uid":                      {APIVersion: pipelinev1.GroupVersion.String(), Kind: "Pipeline", Name: "p", UID: types.UID(long + "0")},
	} {
		ref.Controller = ptr.To(true)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "1",
			Labels: map[string]string{resources.LabelManagedBy: resources.ManagedBy}, OwnerReferences: []metav1.OwnerReference{ref}},
			Data: map[string]string{"k": "v"}}
		cached, err := transformOf(t, cm)(cm)
		if err != nil {
			t.Fatal(err)
		}
		if want := (&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "1"}}); !reflect.DeepEqual(cached, want) {
			t.Errorf("%s: cached as %+v, want only its identity", name, cached)
		}
	}
}

// bigEnvDeployment is the Deployment of the sample's first step with env values over
// MaxCachedChildBytes in all, as its Pipeline asks for it, and what the operator applies.
func bigEnvDeployment(t *testing.T) (*appliedObject, *appsv1.Deployment) {
	t.Helper()
	p := testenv.Sample(t, "default")
	for i := range 4 {
		p.Spec.Steps[0].Env = append(p.Spec.Steps[0].Env, corev1.EnvVar{Name: fmt.Sprintf("CONFIG_%d", i), Value: strings.Repeat("c", 8<<10)})
	}
	a := must(newAppliedObject(resources.StepDeployment(p, 0, "", "", "")))
	d := created(t, a).(*appsv1.Deployment)
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 1, ReadyReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	return a, d
}

// A child larger than MaxCachedChildBytes is cached as its summary: its identity, controller,
// the operator's labels, the mark of its create and its status. Summaries are small whatever
// the child holds, and stay summaries when transformed again.
func TestTransformsSummarizeLargeChildren(t *testing.T) {
	_, d := bigEnvDeployment(t)
	d.UID, d.ResourceVersion, d.Generation = "uid-1", "42", 3
	cached, err := transformOf(t, d)(d.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	s := cached.(*appsv1.Deployment)
	if !IsSummary(s) {
		t.Fatalf("a Deployment of %d bytes is cached whole", d.Size())
	}
	if s.Size() > 1<<10 {
		t.Errorf("the summary takes %d bytes", s.Size())
	}
	if s.Name != d.Name || s.Namespace != d.Namespace || s.UID != d.UID || s.ResourceVersion != d.ResourceVersion ||
		s.Generation != d.Generation || !reflect.DeepEqual(s.Labels, d.Labels) || !reflect.DeepEqual(s.OwnerReferences, d.OwnerReferences) ||
		!reflect.DeepEqual(s.Status, d.Status) || !hasCreatedFields(s) {
		t.Errorf("the summary %+v lost what readers of the cache use", s)
	}
	if len(s.Spec.Template.Spec.Containers) != 0 {
		t.Error("the summary keeps the pod template")
	}
	again, err := transformOf(t, s)(s.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, cached) {
		t.Errorf("a summary transformed again is\n%+v\nwant\n%+v", again, cached)
	}

	// Anyone may write the summary's mark on a child: it is summarized, not cached whole.
	forged := d.DeepCopy()
	forged.Annotations = map[string]string{AnnotationCachedSummary: "true"}
	forged.Spec.Template.Spec.Containers = append(forged.Spec.Template.Spec.Containers, *forged.Spec.Template.Spec.Containers[0].DeepCopy())
	forged.Spec.Template.Spec.Containers[1].Name = "sidecar"
	cached, err = transformOf(t, forged)(forged)
	if err != nil {
		t.Fatal(err)
	}
	if c := cached.(*appsv1.Deployment); !IsSummary(c) || len(c.Spec.Template.Spec.Containers) != 0 {
		t.Error("a child carrying the summary's mark is cached with its pod template")
	}

	// A claim's summary keeps what the stale pass reads.
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns",
		OwnerReferences: d.OwnerReferences, Annotations: map[string]string{AnnotationCachedSummary: "true"}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("fast"), VolumeName: "v",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"big": strings.Repeat("z", 32<<10)}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	cached, err = transformOf(t, pvc)(pvc)
	if err != nil {
		t.Fatal(err)
	}
	c := cached.(*corev1.PersistentVolumeClaim)
	if !IsSummary(c) || ptr.Deref(c.Spec.StorageClassName, "") != "fast" || c.Spec.VolumeName != "v" ||
		c.Spec.Selector != nil || c.Status.Phase != corev1.ClaimBound {
		t.Errorf("the claim's summary is %+v", c)
	}
}

// The operator reads a summarized child from the apiserver: the comparison sees the whole
// child, an up-to-date child costs no write, and a changed one is written once.
func TestApplyReadsSummarizedChildrenFromTheAPIServer(t *testing.T) {
	p := testenv.Sample(t, "default")
	for i := range 4 {
		p.Spec.Steps[0].Env = append(p.Spec.Steps[0].Env, corev1.EnvVar{Name: fmt.Sprintf("CONFIG_%d", i), Value: strings.Repeat("c", 8<<10)})
	}
	desired := resources.StepDeployment(p, 0, "", "", "")
	a := must(newAppliedObject(desired))
	live := created(t, a).(*appsv1.Deployment)
	live.OwnerReferences[0].UID = p.UID
	live.ResourceVersion = "1"
	summary, err := transformOf(t, live)(live.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if !IsSummary(summary.(client.Object)) {
		t.Fatal("the child is not summarized")
	}
	// The fake clients want managedFields as the apiserver writes them.
	summary.(client.Object).SetManagedFields(nil)
	live.ManagedFields[0].APIVersion, live.ManagedFields[0].FieldsType = "apps/v1", "FieldsV1"
	writes := 0
	countWrites := interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			writes++
			return errors.New("no create expected")
		},
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			writes++
			return errors.New("no patch expected")
		},
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			writes++
			return errors.New("no apply expected")
		},
	}
	cache := fake.NewClientBuilder().WithObjects(summary.(client.Object)).WithInterceptorFuncs(countWrites).Build()
	apiserver := fake.NewClientBuilder().WithObjects(live).Build()
	applier := &Applier{Client: cache, APIReader: apiserver, Recorder: events.NewFakeRecorder(10)}

	current := &appsv1.Deployment{}
	res, err := applier.Apply(context.Background(), p, current, desired)
	if err != nil || !res.Owned || res.Updated || writes != 0 {
		t.Fatalf("Apply of an up-to-date summarized child = %+v, %v, %d writes; want owned, no write", res, err, writes)
	}
	if len(current.Spec.Template.Spec.Containers) != 1 || IsSummary(current) {
		t.Error("Apply left the summary in current, not the child")
	}
	owned, err := applier.Child(context.Background(), p, client.ObjectKeyFromObject(live), &appsv1.Deployment{})
	if err != nil || !owned {
		t.Errorf("Child of a summarized child = %v, %v", owned, err)
	}

	// Someone changed a field the operator sets: the whole child, read from the apiserver,
	// shows it.
	live.Spec.Template.Spec.Containers[0].Image = "example.com/other"
	applier.APIReader = fake.NewClientBuilder().WithObjects(live).Build()
	if _, err := applier.Apply(context.Background(), p, &appsv1.Deployment{}, desired); writes == 0 {
		t.Errorf("Apply of a changed summarized child wrote nothing (%v)", err)
	}
}

// What the cache keeps of a Pipeline: its identity, spec, status and finalizers, and of its
// metadata only the annotations the operator reads.
func TestTrimPipeline(t *testing.T) {
	p := testenv.Sample(t, "default")
	p.UID, p.ResourceVersion, p.Generation = "u", "7", 2
	p.Finalizers = []string{"distri-infer.ndsl.cn/cleanup", "tenant.example.com/keep"}
	p.Status.Phase = pipelinev1.PipelinePhaseRunning
	want := p.DeepCopy()
	identity := `{"parts":["nfs","","1Gi","ReadOnlyMany","extra=` + strings.Repeat("x", 1<<10) + `"],"storage":"f"}`
	want.Annotations = map[string]string{pipelinev1.PausedAnnotation: "true", pipelinev1.ConversionDataAnnotation: `{"steps":{}}`,
		pipelinev1.StorageIdentityAnnotation: identity}

	p.Annotations = map[string]string{pipelinev1.PausedAnnotation: "true", pipelinev1.ConversionDataAnnotation: `{"steps":{}}`,
		pipelinev1.StorageIdentityAnnotation:               identity,
		pipelinev1.FailbackAnnotation:                      strings.Repeat("t", 1<<10),
		"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("{}", 100<<10)}
	p.Labels = map[string]string{"team": "vision"}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "c"}}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	p.GenerateName = "face-"
	got, err := defaultTransform(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cached Pipeline\n%+v\nwant\n%+v", got, want)
	}

	// Other kinds without a transform of their own lose their managedFields only.
	ns := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"a": "b"},
		ManagedFields: p.ManagedFields}}
	got, err = defaultTransform(ns)
	if err != nil {
		t.Fatal(err)
	}
	if m := got.(*metav1.PartialObjectMetadata); m.ManagedFields != nil || m.Labels["a"] != "b" {
		t.Errorf("cached namespace %+v", m)
	}
}
