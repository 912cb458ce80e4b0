package apply

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// everyChild is every child the builders make for a Pipeline that asks for all of them.
func everyChild(t *testing.T) []runtime.ApplyConfiguration {
	p := testenv.RoutedSample(t)
	p.Spec.Expose = &pipelinev1.Expose{ServiceType: pipelinev1.ServiceTypeNodePort,
		Ingress: &pipelinev1.IngressExpose{Host: "infer.example.com"}}
	p.Spec.Steps[1].Location = ""
	p.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 4}
	config, err := resources.RouterConfigJSON(p, "")
	if err != nil {
		t.Fatal(err)
	}
	children := []runtime.ApplyConfiguration{resources.PV(p, "", resources.InlineVolumeSource(p)), resources.PVC(p, ""), resources.Ingress(p),
		resources.RouterConfigMap(p, config), resources.RouterDeployment(p, testenv.RouterImage, config, "node-a"), resources.RouterService(p),
		resources.StepHPA(p, 1), resources.StepPDB(p, 1), resources.RouterPDB(p), resources.StepsNetworkPolicy(p)}
	// The steps' NetworkPolicy in mode Chain too, whose selector has an expression.
	chain := p.DeepCopy()
	chain.Spec.DataPath = nil
	children = append(children, resources.StepsNetworkPolicy(chain))
	for i := range p.Spec.Steps {
		children = append(children, resources.StepDeployment(p, i, "", "node-a", ""),
			resources.StepDeployment(p, i, resources.PodSecurityRestricted, "", ""), resources.StepService(p, i))
	}
	// A step with every field of a model server, podMetadata among them.
	server := p.DeepCopy()
	server.Spec.Steps[0] = testenv.ModelServerStep(server.Spec.Steps[0])
	return append(children, resources.StepDeployment(server, 0, "", "node-a", ""))
}

// The up-to-date check compares what the operator wants with what the cache holds, after the
// cache's transforms. A transform that drops a field a builder sets would make every pass
// rewrite that child; a child kind without a transform would be cached whole. Either way this
// test fails, whichever of the two changed.
func TestEveryCachedChildIsUpToDateWithWhatWasApplied(t *testing.T) {
	transforms := map[reflect.Type]func(any) (any, error){}
	for obj, f := range Transforms() {
		transforms[reflect.TypeOf(obj)] = f
	}
	seen := map[reflect.Type]bool{}
	for _, desired := range everyChild(t) {
		a, err := newAppliedObject(desired)
		if err != nil {
			t.Fatal(err)
		}
		u := a.unstructured()
		// The child as the apiserver returns it after the operator's create.
		live := created(t, a)
		obj := live.(runtime.Object)

		transform, ok := transforms[reflect.TypeOf(obj)]
		if !ok {
			t.Errorf("%s %s: no cache transform for its kind in Transforms", u.GetKind(), u.GetName())
			continue
		}
		seen[reflect.TypeOf(obj)] = true
		cached, err := transform(live)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := a.upToDate(cached.(client.Object)); err != nil || !ok {
			t.Errorf("%s %s: the cached child no longer matches what was applied (up to date %v, %v)", u.GetKind(), u.GetName(), ok, err)
		}
		if !hasCreatedFields(cached.(client.Object)) {
			t.Errorf("%s %s: the cache lost the mark of the create, so its fields would never be handed over to the apply",
				u.GetKind(), u.GetName())
		}
	}
	for typ := range transforms {
		if !seen[typ] {
			t.Errorf("Transforms has %s, which no builder makes: remove it, or add its builder to everyChild", typ)
		}
	}
}

// And the converse: a change in a field the builders set is seen through the transform.
func TestTransformsKeepWhatTheBuildersSet(t *testing.T) {
	p := testenv.Sample(t, "default")
	p.Spec.Steps[0].Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 4}
	a, err := newAppliedObject(resources.StepHPA(p, 0))
	if err != nil {
		t.Fatal(err)
	}
	hpa := testenv.Typed[autoscalingv2.HorizontalPodAutoscaler](t, a.content)
	hpa.Spec.MaxReplicas = 9
	cached, err := transformOf(t, hpa)(hpa)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := a.upToDate(cached.(client.Object)); ok {
		t.Error("a changed maxReplicas went unnoticed through the cache transform")
	}
	svc := testenv.Typed[corev1.Service](t, must(newAppliedObject(resources.StepService(p, 0))).content)
	svc.Spec.Ports[0].Port = 1
	cachedSvc, err := transformOf(t, svc)(svc)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := must(newAppliedObject(resources.StepService(p, 0))).upToDate(cachedSvc.(client.Object)); ok {
		t.Error("a changed Service port went unnoticed through the cache transform")
	}
}

// transformOf is the transform of Transforms for the kind of obj.
func transformOf(t *testing.T, obj client.Object) func(any) (any, error) {
	for k, f := range Transforms() {
		if reflect.TypeOf(k) == reflect.TypeOf(obj) {
			return f
		}
	}
	t.Fatalf("no transform for %T", obj)
	return nil
}

// Objects that carry the managed-by label without a Pipeline as their controller are anyone's:
// the cache keeps their identity and nothing else.
func TestTransformsKeepOnlyTheIdentityOfObjectsNoPipelineControls(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	labels := map[string]string{resources.LabelManagedBy: resources.ManagedBy, resources.LabelPipeline: "p"}
	notAPipeline := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Pipeline", Name: "p", UID: "u", Controller: ptr.To(true)}
	notController := metav1.OwnerReference{APIVersion: pipelinev1.GroupVersion.String(), Kind: "Pipeline", Name: "p", UID: "u"}
	for name, owners := range map[string][]metav1.OwnerReference{
		"no owner":                      nil,
		"a Pipeline of another group":   {notAPipeline},
		"a Pipeline, not as controller": {notController},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "1", ResourceVersion: "7",
			Labels: labels, Annotations: map[string]string{"a": big}, OwnerReferences: owners}, Data: map[string]string{"k": big}}
		cached, err := transformOf(t, cm)(cm)
		if err != nil {
			t.Fatal(err)
		}
		want := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "1", ResourceVersion: "7"}}
		if !reflect.DeepEqual(cached, want) {
			t.Errorf("%s: cached as %+v, want only its identity", name, cached)
		}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", Labels: labels},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"a": big}}}}}
	cached, err := transformOf(t, d)(d)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cached, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns"}}) {
		t.Errorf("a foreign Deployment is cached as %+v, want only its identity", cached)
	}
}

// The cache holds no ConfigMap's data, the router's included: a digest stands for it, and a
// change of the data is still seen.
func TestTransformsKeepADigestOfConfigMapData(t *testing.T) {
	p := testenv.RoutedSample(t)
	config, err := resources.RouterConfigJSON(p, "")
	if err != nil {
		t.Fatal(err)
	}
	a := must(newAppliedObject(resources.RouterConfigMap(p, config)))
	cm := testenv.Typed[corev1.ConfigMap](t, a.content)
	cached, err := transformOf(t, cm)(cm.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if c := cached.(*corev1.ConfigMap); c.Data != nil || c.BinaryData != nil || c.Annotations[AnnotationCachedDataDigest] == "" {
		t.Fatalf("the cached ConfigMap keeps data %v, digest %q", c.Data, c.Annotations[AnnotationCachedDataDigest])
	}
	if ok, err := a.upToDate(cached.(client.Object)); err != nil || !ok {
		t.Errorf("the cached router ConfigMap does not match what was applied (%v, %v)", ok, err)
	}
	for key := range cm.Data {
		cm.Data[key] += " "
	}
	edited, err := transformOf(t, cm)(cm)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := a.upToDate(edited.(client.Object)); ok {
		t.Error("an edit of the router ConfigMap's data went unnoticed through the cache transform")
	}
}

// An informer may pass an object through its transform more than once.
func TestTransformsAreIdempotent(t *testing.T) {
	for _, desired := range everyChild(t) {
		a := must(newAppliedObject(desired))
		obj, err := clientgoscheme.Scheme.New(a.unstructured().GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(a.content, obj); err != nil {
			t.Fatal(err)
		}
		transform := transformOf(t, obj.(client.Object))
		once, err := transform(obj.(client.Object).DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		twice, err := transform(once.(runtime.Object).DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(once, twice) {
			t.Errorf("%s %s: transformed twice differs from once", a.unstructured().GetKind(), a.unstructured().GetName())
		}
	}
}
