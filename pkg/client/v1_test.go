package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	acv1 "github.com/ndsl-cn/pipeline-operator/pkg/client/applyconfiguration/api/v1"
	"github.com/ndsl-cn/pipeline-operator/pkg/client/clientset/versioned/fake"
	"github.com/ndsl-cn/pipeline-operator/pkg/client/informers/externalversions"
)

// v1Apply is a v1 Pipeline with one named step on NFS storage, built with the v1 apply
// configurations.
func v1Apply(ns string) *acv1.PipelineApplyConfiguration {
	return acv1.Pipeline("vision", ns).WithSpec(acv1.PipelineSpec().
		WithSteps(acv1.Step().WithName("detect").WithImage("nginx:latest").WithModel("facedetection-1").WithPort(9080)).
		WithModelStorage(acv1.ModelStorage().WithType(pipelinev1.ModelStorageTypeNFS).
			WithNFS(acv1.NFSStorage().WithServer("192.168.20.235").WithPath("/models"))))
}

// TestV1ApplyConfigurationJSON checks that the v1 apply configuration of a Pipeline with a
// named step and an NFS storage member serialises to the JSON of the v1 API, and that this
// JSON decodes into a v1 Pipeline with no field left over.
func TestV1ApplyConfigurationJSON(t *testing.T) {
	data, err := json.Marshal(v1Apply("default"))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{
		"kind": "Pipeline",
		"apiVersion": "distri-infer.ndsl.cn/v1",
		"metadata": {"name": "vision", "namespace": "default"},
		"spec": {
			"steps": [{"name": "detect", "image": "nginx:latest", "model": "facedetection-1", "port": 9080}],
			"modelStorage": {"type": "NFS", "nfs": {"server": "192.168.20.235", "path": "/models"}}
		}
	}`
	var got, wanted any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &wanted); err != nil {
		t.Fatal(err)
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(wanted)
	if !bytes.Equal(gotJSON, wantJSON) {
		t.Fatalf("apply configuration serialised to\n%s\nwant\n%s", gotJSON, wantJSON)
	}

	var p pipelinev1.Pipeline
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("the apply configuration is no v1 Pipeline: %v", err)
	}
	if p.APIVersion != pipelinev1.GroupVersion.String() || p.Kind != "Pipeline" {
		t.Errorf("apiVersion %q, kind %q", p.APIVersion, p.Kind)
	}
	if len(p.Spec.Steps) != 1 || p.Spec.Steps[0].Name != "detect" || ptr.Deref(p.Spec.Steps[0].Port, 0) != 9080 {
		t.Errorf("steps %+v", p.Spec.Steps)
	}
	if s := p.Spec.ModelStorage; s.Type != pipelinev1.ModelStorageTypeNFS || s.NFS == nil ||
		s.NFS.Server != "192.168.20.235" || s.NFS.Path != "/models" || s.CSI != nil {
		t.Errorf("modelStorage %+v", s)
	}
}

// TestV1Clientset creates, gets, lists and applies to a v1 Pipeline through the v1 typed client
// of the generated fake clientset, and reads it back through the v1 informer and lister. The
// fake's tracker applies to an existing object only (its server-side apply does not know the
// Pipeline's schema), so the Pipeline is created first.
func TestV1Clientset(t *testing.T) {
	ctx := t.Context()
	const ns = "default"
	cs := fake.NewSimpleClientset()
	pipelines := cs.DistriInferV1().Pipelines(ns)

	want := &pipelinev1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{Name: "vision", Namespace: ns},
		Spec: pipelinev1.PipelineSpec{
			Steps: []pipelinev1.Step{{Name: "detect", Image: "nginx:latest", Model: "facedetection-1"}},
			ModelStorage: pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS,
				NFS: &pipelinev1.NFSStorage{Server: "192.168.20.235", Path: "/models"}},
		},
	}
	if _, err := pipelines.Create(ctx, want, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pipelines.Get(ctx, "vision", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ModelStorage.NFS == nil || got.Spec.ModelStorage.NFS.Server != "192.168.20.235" {
		t.Errorf("got %+v", got.Spec.ModelStorage)
	}
	list, err := pipelines.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "vision" {
		t.Errorf("list %+v", list.Items)
	}

	applied, err := pipelines.Apply(ctx, v1Apply(ns), metav1.ApplyOptions{FieldManager: "client-test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(applied.Spec.Steps) != 1 || ptr.Deref(applied.Spec.Steps[0].Port, 0) != 9080 {
		t.Errorf("applied steps %+v", applied.Spec.Steps)
	}

	for _, a := range cs.Actions() {
		if gvr := a.GetResource(); gvr != pipelinev1.GroupVersion.WithResource("pipelines") {
			t.Errorf("%s went to %s, not the v1 pipelines", a.GetVerb(), gvr)
		}
	}

	factory := externalversions.NewSharedInformerFactoryWithOptions(cs, 0, externalversions.WithNamespace(ns))
	lister := factory.DistriInfer().V1().Pipelines().Lister()
	informerCtx, stop := context.WithCancel(ctx)
	defer func() { stop(); factory.Shutdown() }()
	factory.StartWithContext(informerCtx)
	if err := factory.WaitForCacheSyncWithContext(informerCtx).AsError(); err != nil {
		t.Fatal(err)
	}
	if all, err := lister.List(labels.Everything()); err != nil || len(all) != 1 {
		t.Fatalf("lister: %d Pipelines, %v", len(all), err)
	}
	cached, err := lister.Pipelines(ns).Get("vision")
	if err != nil {
		t.Fatal(err)
	}
	if len(cached.Spec.Steps) != 1 || ptr.Deref(cached.Spec.Steps[0].Port, 0) != 9080 {
		t.Errorf("cached steps %+v", cached.Spec.Steps)
	}
}
