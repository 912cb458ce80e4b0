package guard

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The guard's answers that need no Pipeline; what it compares with one is tested against a real
// apiserver in internal/manager (guard_test.go).
func TestHandleWithoutPipeline(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := pipelinev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	g := &Guard{Live: fake.NewClientBuilder().WithScheme(scheme).Build()}
	raw := func(obj any) runtime.RawExtension {
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	owned := func(t corev1.ServiceType) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: pipelinev1.GroupVersion.String(), Kind: "Pipeline", Name: "p", UID: "1", Controller: new(true)}}},
			Spec: corev1.ServiceSpec{Type: t, Selector: map[string]string{"app": "a"}}}
	}
	services := metav1.GroupVersionResource{Version: "v1", Resource: "services"}
	for _, c := range []struct {
		name    string
		req     admissionv1.AdmissionRequest
		allowed bool
		code    int32
		message string
	}{
		{name: "an update that changes nothing checked, of a Service whose Pipeline is gone",
			req: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Resource: services,
				Object: raw(owned(corev1.ServiceTypeClusterIP)), OldObject: raw(owned(""))}, allowed: true},
		{name: "an update that changes the type",
			req: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Resource: services,
				Object: raw(owned(corev1.ServiceTypeNodePort)), OldObject: raw(owned(""))},
			message: "Service s is controlled by Pipeline ns/p of uid 1, which does not exist"},
		{name: "a Service no Pipeline controls",
			req: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Resource: services,
				Object: raw(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}})},
			message: "the operator's Service s is controlled by no Pipeline"},
		{name: "a volume that names no Pipeline",
			req: admissionv1.AdmissionRequest{Operation: admissionv1.Create,
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"},
				Object:   raw(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "v"}})},
			message: "the operator's PersistentVolume v names no Pipeline"},
		{name: "a deletion", req: admissionv1.AdmissionRequest{Operation: admissionv1.Delete, Resource: services}, allowed: true},
		{name: "another resource", req: admissionv1.AdmissionRequest{Operation: admissionv1.Create,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}}, allowed: true},
		{name: "an object that is not JSON",
			req: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Resource: services,
				Object: runtime.RawExtension{Raw: []byte("{")}}, code: http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := g.Handle(context.Background(), admission.Request{AdmissionRequest: c.req})
			if resp.Allowed != c.allowed {
				t.Fatalf("allowed %t, want %t: %+v", resp.Allowed, c.allowed, resp.Result)
			}
			if c.code != 0 && resp.Result.Code != c.code {
				t.Errorf("code %d, want %d", resp.Result.Code, c.code)
			}
			if c.message != "" && !strings.Contains(resp.Result.Message, c.message) {
				t.Errorf("message %q, want %q", resp.Result.Message, c.message)
			}
		})
	}
}

// A refusal tells the caller what of its request was refused; what the Pipeline asks for instead
// goes to the log only.
func TestRefusalLogsWhatThePipelineAsks(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := pipelinev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	p := testenv.Sample(t, "ns")
	svc := testenv.Typed[corev1.Service](t, resources.StepService(p, 0))
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	obj, err := json.Marshal(svc)
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	ctx := logf.IntoContext(context.Background(), funcr.New(func(_, args string) { logged.WriteString(args) }, funcr.Options{}))
	g := &Guard{Live: fake.NewClientBuilder().WithScheme(scheme).WithObjects(p).Build()}
	resp := g.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create,
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "services"}, Object: runtime.RawExtension{Raw: obj}}})
	if resp.Allowed || !strings.Contains(resp.Result.Message, "is of type LoadBalancer, which its spec does not ask for") {
		t.Fatalf("answer %+v, want the type refused", resp.Result)
	}
	if strings.Contains(resp.Result.Message, "ClusterIP") {
		t.Errorf("the answer %q names the type the Pipeline asks for", resp.Result.Message)
	}
	if !strings.Contains(logged.String(), `"asked"="type ClusterIP"`) {
		t.Errorf("log %q, want what the Pipeline asks for", logged.String())
	}
}
