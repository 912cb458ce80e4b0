package admission

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

// sampleV1 is the sample Pipeline written in v1, in namespace default.
func sampleV1(t *testing.T) *pipelinev1.Pipeline {
	t.Helper()
	p, err := samples.PipelineV1("default")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// requestIn is a context that carries an admission request made in version.
func requestIn(version string) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		RequestKind: &metav1.GroupVersionKind{Group: pipelinev1.GroupVersion.Group, Version: version, Kind: "Pipeline"},
	}})
}

// A Pipeline stored before a check existed (here: an image with a trailing space) can still
// get labels, annotations, finalizers, a pause and a failback request; a change of the rest of
// its spec must then pass every check.
func TestValidateUpdateChecksOnlyChangedSpecs(t *testing.T) {
	stored := sampleV1(t)
	stored.Spec.Steps[0].Image = "nginx:latest "
	stored.Spec.Failover = &pipelinev1.Failover{Failback: pipelinev1.FailbackManual}
	v := &Validator{}
	ctx := context.Background()

	labelled := stored.DeepCopy()
	labelled.Labels = map[string]string{"team": "vision"}
	labelled.Spec.Paused = ptr.To(true)
	labelled.Spec.Failover.FailbackNow = ptr.To(true)
	if _, err := v.ValidateUpdate(ctx, stored, labelled); err != nil {
		t.Fatalf("an update of metadata, paused and failbackNow was refused: %v", err)
	}
	if _, err := v.ValidateUpdate(ctx, labelled, stored); err != nil {
		t.Fatalf("clearing paused and failbackNow was refused: %v", err)
	}

	edited := labelled.DeepCopy()
	edited.Spec.Steps[1].Model = "facedetection-3"
	_, err := v.ValidateUpdate(ctx, stored, edited)
	if err == nil || !strings.Contains(err.Error(), "spec.steps[0].image") {
		t.Fatalf("a spec update kept an invalid image: %v", err)
	}
}

func TestNFSPathMayEndInASlash(t *testing.T) {
	p := sampleV1(t)
	for share, ok := range map[string]bool{"/exports/models/": true, "/": true, "/exports/../models": false, "/exports//models": false} {
		p.Spec.ModelStorage.NFS.Path = share
		errs := ValidatePipeline(p)
		if (len(errs) == 0) != ok {
			t.Errorf("path %q: errors %v, want accepted %t", share, errs, ok)
		}
		if !ok && (len(errs) != 1 || errs[0].Field != "spec.modelStorage.nfs.path") {
			t.Errorf("path %q: errors %v, want one on spec.modelStorage.nfs.path", share, errs)
		}
	}
}

// Each kind of storage has its source checked, and the capacity and access modes of its member.
func TestValidateStorage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		storage pipelinev1.ModelStorage
		field   string // empty: accepted
		message string
	}{
		{"an NFS server by name", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS,
			NFS: &pipelinev1.NFSStorage{Server: "nfs.example.com", Path: "/exports/models"}}, "", ""},
		{"an NFS server that is no host", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS,
			NFS: &pipelinev1.NFSStorage{Server: "nfs server!", Path: "/models"}},
			"spec.modelStorage.nfs.server", "must be an IP address or a DNS name of the NFS server"},
		{"a CSI driver that is no driver name", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
			CSI: &pipelinev1.CSIStorage{Driver: "NFS_Driver", VolumeAttributes: map[string]string{"server": "10.0.0.2"}}},
			"spec.modelStorage.csi.driver", "must be a CSI driver name"},
		{"a CSI volume", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeCSI,
			CSI: &pipelinev1.CSIStorage{Driver: "smb.csi.k8s.io", VolumeAttributes: map[string]string{"source": "//srv/models"}}}, "", ""},
		{"a StorageClass name that is no object name", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass,
			StorageClass: &pipelinev1.StorageClassStorage{Name: "Fast_SSD"}},
			"spec.modelStorage.storageClass.name", "not a valid StorageClass name"},
		{"a claim name that is no object name", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim,
			ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: "Team_Models"}},
			"spec.modelStorage.existingClaim.name", "not a valid claim name"},
		{"a ModelStorageClass name that is no object name", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
			ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: "Shared_Models"}},
			"spec.modelStorage.modelStorageClass.name", "not a valid ModelStorageClass name"},
		{"a zero capacity", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass,
			StorageClass: &pipelinev1.StorageClassStorage{Name: "fast", Capacity: ptr.To(resource.MustParse("0"))}},
			"spec.modelStorage.storageClass.capacity", "must be greater than zero"},
		{"an unknown access mode", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
			ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: "shared", AccessModes: []corev1.PersistentVolumeAccessMode{"ReadSometimes"}}},
			"spec.modelStorage.modelStorageClass.accessModes[0]", "Unsupported value"},
		{"an access mode twice", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS,
			NFS: &pipelinev1.NFSStorage{Server: "10.0.0.2", Path: "/models",
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadOnlyMany}}},
			"spec.modelStorage.nfs.accessModes[1]", "Duplicate value"},
		{"the root as mount path", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim,
			ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: "models"}, MountPath: "/"},
			"spec.modelStorage.mountPath", "must not be the root directory"},
		{"a mount path with '..'", pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim,
			ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: "models"}, MountPath: "/data/../models"},
			"spec.modelStorage.mountPath", "must be a clean absolute path (/models)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := sampleV1(t)
			p.Spec.ModelStorage = tc.storage
			errs := ValidatePipeline(p)
			if tc.field == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.field || !strings.Contains(errs[0].Error(), tc.message) {
				t.Fatalf("errors %v, want one on %s saying %q", errs, tc.field, tc.message)
			}
		})
	}
}

// An env entry of a name the operator sets replaces the operator's value in v1: accepted, with
// a warning. Names with '=' or whitespace, and value with valueFrom, are refused.
func TestValidateEnv(t *testing.T) {
	p := sampleV1(t)
	p.Spec.Steps[1].Env = []corev1.EnvVar{{Name: pipelinev1.EnvModelPath, Value: "/elsewhere"}, {Name: "BATCH", Value: "8"}}
	if errs := ValidatePipeline(p); len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	if got := warnings(p, nil, nil, fieldNames{}); !slices.Contains(got, "step step-2: env MODEL_PATH replaces the value the operator sets") {
		t.Errorf("warnings %q, want the one about MODEL_PATH", got)
	}
	p.Spec.Steps[1].Env = []corev1.EnvVar{{Name: "A=B", Value: "1"}, {Name: "C D", Value: "1"},
		{Name: "E", Value: "1", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	var fields []string
	for _, e := range ValidatePipeline(p) {
		fields = append(fields, e.Field)
	}
	if want := []string{"spec.steps[1].env[A=B].name", "spec.steps[1].env[C D].name", "spec.steps[1].env[E]"}; !slices.Equal(fields, want) {
		t.Errorf("errors on %v, want %v", fields, want)
	}
}

// A toleration without a key and with operator Exists tolerates every taint: it is refused with
// its own path, with or without an effect, in both versions' requests; a toleration of a named
// taint is not.
func TestValidateRefusesATolerationOfEveryTaint(t *testing.T) {
	p := sampleV1(t)
	p.Spec.Steps[0].Tolerations = []corev1.Toleration{
		{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists},
		{Operator: corev1.TolerationOpExists},
	}
	p.Spec.Steps[1].Tolerations = []corev1.Toleration{
		{Key: "edge", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Operator: corev1.TolerationOpEqual, Value: "x"},
	}
	var got []string
	for _, e := range ValidatePipeline(p) {
		got = append(got, e.Error())
	}
	want := []string{
		"spec.steps[0].tolerations[1]: Forbidden: a toleration without a key tolerates every taint",
		"spec.steps[1].tolerations[1]: Forbidden: a toleration without a key tolerates every taint",
		"spec.steps[1].tolerations[2].key: Required value: a toleration names the taint it tolerates",
	}
	if len(got) != len(want) {
		t.Fatalf("errors %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %q, want one that starts %q", got[i], want[i])
		}
	}
	for _, version := range []string{"v1", "v1beta1"} {
		_, err := (&Validator{}).ValidateCreate(requestIn(version), p)
		if err == nil || !strings.Contains(err.Error(), "spec.steps[0].tolerations[1]: Forbidden: a toleration without a key tolerates every taint "+
			"(the control plane's, those of nodes kept for others, the eviction of a failed node's pods): name the taint in key") {
			t.Errorf("%s request: error %v, want the toleration of every taint named by its path", version, err)
		}
	}
}

// Every stopWhen is compiled with the router's own compiler: what the router would refuse at
// start-up is refused at admission, with the compiler's message and the field's path.
func TestValidateCompilesStopWhen(t *testing.T) {
	p := sampleV1(t)
	for expr, want := range map[string]string{
		`status == 200 && response.faces == 0`: "",
		`has(response.done) && response.done`:  "",
		`response.faces ==`:                    "Syntax error",
		`status + 1`:                           "must be a bool",
		`nosuchvariable > 1`:                   "undeclared reference",
		`tensors.score[0] > 0.5`:               "reads tensors, which only the answer of a step of protocol OpenInferenceProtocol or OpenInferenceProtocolGRPC has",
	} {
		p.Spec.Steps[1].StopWhen = expr
		errs := ValidatePipeline(p)
		if want == "" {
			if len(errs) != 0 {
				t.Errorf("stopWhen %q was refused: %v", expr, errs)
			}
			continue
		}
		if len(errs) != 1 {
			t.Errorf("stopWhen %q: errors %v, want one", expr, errs)
			continue
		}
		if errs[0].Field != "spec.steps[1].stopWhen" || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("stopWhen %q: error %q, want one at spec.steps[1].stopWhen containing %q", expr, errs[0].Error(), want)
		}
	}
}

// An Open Inference Protocol step's stopWhen may read its answer's tensors, over REST or gRPC.
func TestValidateStopWhenReadsTensorsOfAnOpenInferenceStep(t *testing.T) {
	for _, protocol := range []pipelinev1.StepProtocol{pipelinev1.StepProtocolOpenInference, pipelinev1.StepProtocolOpenInferenceGRPC} {
		p := sampleV1(t)
		p.Spec.Steps[1].StopWhen = `tensors.score.exists(s, s > 0.9)`
		p.Spec.Steps[1].Protocol = protocol
		if errs := ValidatePipeline(p); len(errs) != 0 {
			t.Errorf("%s: refused: %v", protocol, errs)
		}
	}
}

func TestValidateRouterResources(t *testing.T) {
	p := sampleV1(t)
	routerOn(p, &pipelinev1.Router{Resources: &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
	}})
	errs := ValidatePipeline(p)
	if len(errs) != 1 || errs[0].Field != "spec.dataPath.router.resources.requests[memory]" || !strings.Contains(errs[0].Error(), "must not exceed the limit 128Mi") {
		t.Fatalf("errors %v, want one on spec.dataPath.router.resources.requests[memory]", errs)
	}
	p.Spec.DataPath.Router.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("512Mi")
	if errs := ValidatePipeline(p); len(errs) != 0 {
		t.Fatalf("valid router resources refused: %v", errs)
	}
}

// A header the router sets itself cannot be passed on from the caller.
func TestValidateRouterPropagateHeaders(t *testing.T) {
	p := sampleV1(t)
	routerOn(p, &pipelinev1.Router{PropagateHeaders: []pipelinev1.HeaderName{"X-User", "X-Request-Id"}})
	errs := ValidatePipeline(p)
	if len(errs) != 1 || errs[0].Field != "spec.dataPath.router.propagateHeaders[1]" || !strings.Contains(errs[0].Error(), "set by the router itself") {
		t.Fatalf("errors %v, want one on spec.dataPath.router.propagateHeaders[1]", errs)
	}
	p.Spec.DataPath.Router.PropagateHeaders = p.Spec.DataPath.Router.PropagateHeaders[:1]
	if errs := ValidatePipeline(p); len(errs) != 0 {
		t.Fatalf("a plain header refused: %v", errs)
	}
}

// Expect, the Proxy-* headers and Inference-Header-Content-Length were admitted once, and the
// router dropped them: a new name of these is refused, one a stored Pipeline already has stays
// (its other fields can still be edited) with a warning that the router leaves it out.
func TestValidateUpdateKeepsAHeaderTheRouterDrops(t *testing.T) {
	v := &Validator{}
	ctx := context.Background()
	p := sampleV1(t)
	routerOn(p, &pipelinev1.Router{PropagateHeaders: []pipelinev1.HeaderName{"X-User", "Expect"}})
	if _, err := v.ValidateCreate(ctx, p); err == nil || !strings.Contains(err.Error(), `spec.dataPath.router.propagateHeaders[1]: Invalid value: "Expect": "Expect" is set by the router itself`) {
		t.Fatalf("create with Expect: %v, want it refused", err)
	}

	stored := p
	edited := stored.DeepCopy()
	edited.Spec.Steps[1].Model = "facedetection-3"
	warnings, err := v.ValidateUpdate(ctx, stored, edited)
	if err != nil {
		t.Fatalf("an edit of a Pipeline that had Expect was refused: %v", err)
	}
	want := `router: propagateHeaders Expect is not passed on to the steps: "Expect" is set by the router itself; remove it`
	if !slices.Contains(warnings, want) {
		t.Errorf("warnings %q, want %q", warnings, want)
	}

	added := edited.DeepCopy()
	added.Spec.DataPath.Router.PropagateHeaders = append(added.Spec.DataPath.Router.PropagateHeaders, "Proxy-Authorization")
	if _, err := v.ValidateUpdate(ctx, edited, added); err == nil || !strings.Contains(err.Error(), "spec.dataPath.router.propagateHeaders[2]") ||
		strings.Contains(err.Error(), "propagateHeaders[1]") {
		t.Fatalf("adding Proxy-Authorization: %v, want only it refused", err)
	}
}

// The nodes a step or the router may run on, fallbacks included, are node names; the schema's
// pattern lets a..b through.
func TestValidateNodeNames(t *testing.T) {
	p := sampleV1(t)
	p.Spec.Steps[0].FallbackLocations = []string{"edge-b", "edge..c"}
	routerOn(p, &pipelinev1.Router{Location: "edge..a", FallbackLocations: []string{"edge-b", "-x"}})
	var fields []string
	for _, e := range ValidatePipeline(p) {
		if !strings.Contains(e.Error(), "not a valid node name") {
			t.Errorf("unexpected error %v", e)
		}
		fields = append(fields, e.Field)
	}
	want := []string{"spec.steps[0].fallbackLocations[1]", "spec.dataPath.router.location", "spec.dataPath.router.fallbackLocations[1]"}
	if !slices.Equal(fields, want) {
		t.Errorf("errors on %v, want %v", fields, want)
	}
	p.Spec.Steps[0].FallbackLocations = []string{"edge-b", "edge.c"}
	routerOn(p, &pipelinev1.Router{Location: "edge-a", FallbackLocations: []string{"edge-b"}})
	if errs := ValidatePipeline(p); len(errs) != 0 {
		t.Fatalf("valid node names refused: %v", errs)
	}
}

// Storage of type StorageClass keeps its claim only while its type and its storageClass member
// stay; ValidatePipelineUpdate names the field that changed and says how to move the models.
func TestValidatePipelineUpdateKeepsStorageClassStorage(t *testing.T) {
	byClass := pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass, StorageClass: &pipelinev1.StorageClassStorage{
		Name: "fast", Capacity: ptr.To(resource.MustParse("5Gi")), AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}}
	const move = "modelStorage of type StorageClass cannot change (only mountPath may): its claim holds the models and a new claim " +
		"would start empty. To move the models: create a claim as you need it, copy the models into it, and point a Pipeline at it " +
		"with modelStorage.type ExistingClaim and modelStorage.existingClaim.name"
	for _, tc := range []struct {
		name  string
		edit  func(m *pipelinev1.ModelStorage)
		field string // empty: accepted
	}{
		{"a larger capacity", func(m *pipelinev1.ModelStorage) { m.StorageClass.Capacity = ptr.To(resource.MustParse("10Gi")) },
			"spec.modelStorage.storageClass.capacity"},
		{"another class", func(m *pipelinev1.ModelStorage) { m.StorageClass.Name = "slow" }, "spec.modelStorage.storageClass.name"},
		{"other access modes", func(m *pipelinev1.ModelStorage) { m.StorageClass.AccessModes = nil }, "spec.modelStorage.storageClass.accessModes"},
		{"another type", func(m *pipelinev1.ModelStorage) {
			*m = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim, ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: "copied"}}
		}, "spec.modelStorage.type"},
		{"the mount path", func(m *pipelinev1.ModelStorage) { m.MountPath = "/data/models" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := sampleV1(t)
			old.Spec.ModelStorage = *byClass.DeepCopy()
			p := old.DeepCopy()
			tc.edit(&p.Spec.ModelStorage)
			errs := ValidatePipelineUpdate(old, p)
			if tc.field == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Field != tc.field || !strings.Contains(errs[0].Error(), move) {
				t.Fatalf("errors %v, want one on %s saying %q", errs, tc.field, move)
			}
		})
	}
}

// A request made in v1beta1 reaches the webhook converted to v1: its refusals name the v1beta1
// fields and spell the storage types as v1beta1 does.
func TestValidateNamesTheFieldsOfAV1beta1Request(t *testing.T) {
	stored := sampleV1(t)
	stored.Spec.ModelStorage = pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass,
		StorageClass: &pipelinev1.StorageClassStorage{Name: "fast"}}
	p := stored.DeepCopy()
	p.Spec.ModelStorage.StorageClass.Name = "Fast_SSD"
	routerOn(p, &pipelinev1.Router{Location: "edge..a"})
	v := &Validator{Spellings: spellings}
	for version, want := range map[string][]string{
		"v1": {"spec.dataPath.router.location", "spec.modelStorage.storageClass.name: Invalid value",
			"spec.modelStorage.storageClass.name: Forbidden: was fast, not Fast_SSD: modelStorage of type StorageClass cannot change",
			"with modelStorage.type ExistingClaim and modelStorage.existingClaim.name"},
		"v1beta1": {"spec.router.location", "spec.modelStorage.storageClassName: Invalid value",
			"spec.modelStorage.storageClassName: Forbidden: was fast, not Fast_SSD: modelStorage of type storageClass cannot change",
			"with modelStorage.type existingClaim and modelStorage.claimName"},
	} {
		_, err := v.ValidateUpdate(requestIn(version), stored, p)
		if err == nil {
			t.Fatalf("%s: accepted", version)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", version, err, w)
			}
		}
	}
}

// On an update, a port that was the value of the step's listenPort variable follows a new value
// of the variable alone; a port changed with it, or a value that is no port, is left alone.
func TestDefaultFollowsListenPort(t *testing.T) {
	withListenPort := func(p *pipelinev1.Pipeline, i int, port int32, value string) {
		p.Spec.Steps[i].Port = ptr.To(port)
		p.Spec.Steps[i].Env = []corev1.EnvVar{{Name: "BATCH", Value: "8"}, {Name: pipelinev1.ListenPortEnv, Value: value}}
	}
	for _, tc := range []struct {
		name     string
		old      func(p *pipelinev1.Pipeline)
		edit     func(p *pipelinev1.Pipeline)
		wantPort int32
	}{
		{"only the variable changed", func(p *pipelinev1.Pipeline) { withListenPort(p, 0, 9080, "9080") },
			func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Env[1].Value = "9090" }, 9090},
		{"the port changed too", func(p *pipelinev1.Pipeline) { withListenPort(p, 0, 9080, "9080") },
			func(p *pipelinev1.Pipeline) { withListenPort(p, 0, 7070, "9191") }, 7070},
		{"the port was not the variable's value", func(p *pipelinev1.Pipeline) { withListenPort(p, 0, 8080, "9080") },
			func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Env[1].Value = "9090" }, 8080},
		{"the new value is no port", func(p *pipelinev1.Pipeline) { withListenPort(p, 0, 9080, "9080") },
			func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Env[1].Value = "99999" }, 9080},
		{"the variable was removed", func(p *pipelinev1.Pipeline) { withListenPort(p, 0, 9080, "9080") },
			func(p *pipelinev1.Pipeline) { p.Spec.Steps[0].Env = p.Spec.Steps[0].Env[:1] }, 9080},
		{"the variable was added", func(*pipelinev1.Pipeline) {},
			func(p *pipelinev1.Pipeline) { withListenPort(p, 0, 9080, "9090") }, 9080},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := sampleV1(t)
			tc.old(old)
			old.Default()
			p := old.DeepCopy()
			tc.edit(p)
			raw, err := json.Marshal(old)
			if err != nil {
				t.Fatal(err)
			}
			ctx := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Update, OldObject: runtime.RawExtension{Raw: raw}}})
			if err := (&Defaulter{}).Default(ctx, p); err != nil {
				t.Fatal(err)
			}
			if got := p.Spec.Steps[0].Port; got == nil || *got != tc.wantPort {
				t.Errorf("port %v, want %d", got, tc.wantPort)
			}
			if got := p.Spec.Steps[1].Port; got == nil || *got != pipelinev1.DefaultPort {
				t.Errorf("the other step's port %v, want %d", got, pipelinev1.DefaultPort)
			}
		})
	}
}

// Removing autoscaling brings the step back to its replicas at once: the update says so.
func TestValidateUpdateWarnsWhenAutoscalingIsRemoved(t *testing.T) {
	stored := sampleV1(t)
	stored.Spec.Steps[1].Autoscaling = &pipelinev1.StepAutoscaling{MaxReplicas: 6}
	v := &Validator{}
	ctx := context.Background()

	kept := stored.DeepCopy()
	kept.Spec.Steps[1].Image = "nginx:1.27"
	warnings, err := v.ValidateUpdate(ctx, stored, kept)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		if strings.Contains(w, "autoscaling removed") {
			t.Errorf("warned while autoscaling stays: %q", w)
		}
	}

	removed := stored.DeepCopy()
	removed.Spec.Steps[1].Autoscaling = nil
	warnings, err = v.ValidateUpdate(ctx, stored, removed)
	if err != nil {
		t.Fatal(err)
	}
	want := "step step-2: autoscaling removed: its autoscaler is deleted and the step runs replicas (1) pods from now on"
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, want) }) {
		t.Errorf("warnings %q, want one containing %q", warnings, want)
	}
}

func TestWarningsKnowFallbackLocations(t *testing.T) {
	p := sampleV1(t)
	p.Spec.Steps[0].Location = "edge-a"
	p.Spec.Steps[1].Location = "edge-a"
	p.Spec.Steps[1].FallbackLocations = []string{"edge-b"}
	p.Spec.ModelStorage.NFS.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	none := func(string) (bool, error) { return false, nil }
	got := strings.Join(warnings(p, nil, none, fieldNames{}), "\n")
	for _, want := range []string{
		`step step-1: no node "edge-a" exists yet: the step stays pending until it joins the cluster`,
		"modelStorage.nfs.accessModes ReadWriteOnce: steps may run on 2 different nodes (their locations and fallbackLocations) " +
			"and cannot all mount the volume",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings %q do not say %q", got, want)
		}
	}
	got = strings.Join(warnings(p, nil, none, fieldNames{spelling: spellings["v1beta1"], p: p}), "\n")
	if want := "modelStorage.accessModes ReadWriteOnce: steps may run on 2 different nodes"; !strings.Contains(got, want) {
		t.Errorf("warnings to a v1beta1 request %q do not say %q", got, want)
	}

	p.Spec.Steps[0].Location = "edge-c"
	p.Spec.Steps[1].Location = "edge-a"
	got = strings.Join(warnings(p, nil, none, fieldNames{}), "\n")
	want := `step step-2: no node "edge-a" exists yet: the step starts on the first ready node of its fallbackLocations ` +
		"and moves to edge-a once it joins the cluster as spec.failover.failback says"
	if !strings.Contains(got, want) {
		t.Errorf("warnings %q do not say %q", got, want)
	}

	routerOn(p, &pipelinev1.Router{Location: "edge-r"})
	got = strings.Join(warnings(p, nil, none, fieldNames{}), "\n")
	if want := `router: no node "edge-r" exists yet: the router stays pending until it joins the cluster`; !strings.Contains(got, want) {
		t.Errorf("warnings %q do not say %q", got, want)
	}
	p.Spec.DataPath.Router.FallbackLocations = []string{"edge-s"}
	got = strings.Join(warnings(p, nil, none, fieldNames{}), "\n")
	if want := `router: no node "edge-r" exists yet: the router starts on the first ready node of its fallbackLocations ` +
		"and moves to edge-r once it joins the cluster as spec.failover.failback says"; !strings.Contains(got, want) {
		t.Errorf("warnings %q do not say %q", got, want)
	}
	some := func(string) (bool, error) { return true, nil }
	if got := warnings(p, nil, some, fieldNames{}); slices.ContainsFunc(got, func(w string) bool { return strings.HasPrefix(w, "router:") }) {
		t.Errorf("warnings %q about a router whose node exists", got)
	}
}

// The warning about a storage change says what becomes of the old storage, truthfully for each
// type: NFS and CSI volumes are deleted with the models left on their server (reclaim policy
// Retain), a user's claim stays, and a change that keeps the claim warns of nothing.
func TestStorageChangeWarnings(t *testing.T) {
	nfs := pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS, NFS: &pipelinev1.NFSStorage{Server: "10.0.0.2", Path: "/models"}}
	otherNFS := pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeNFS, NFS: &pipelinev1.NFSStorage{Server: "10.0.0.3", Path: "/models"}}
	byClass := pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeStorageClass, StorageClass: &pipelinev1.StorageClassStorage{Name: "fast"}}
	claim := func(name string) pipelinev1.ModelStorage {
		return pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeExistingClaim, ExistingClaim: &pipelinev1.ExistingClaimStorage{Name: name}}
	}
	published := func(name string) pipelinev1.ModelStorage {
		return pipelinev1.ModelStorage{Type: pipelinev1.ModelStorageTypeModelStorageClass,
			ModelStorageClass: &pipelinev1.ModelStorageClassStorage{Name: name}}
	}
	const retained = "; then it deletes the old volume and claim, whose reclaim policy Retain leaves the models on the NFS or CSI storage"
	for _, tc := range []struct {
		name    string
		was, is pipelinev1.ModelStorage
		want    string // empty: no storage warning
	}{
		{"NFS to another export", nfs, otherNFS,
			"modelStorage changed: the operator creates a new volume and claim and moves every step onto them (the steps' pods restart)" + retained},
		{"NFS to StorageClass", nfs, byClass,
			"modelStorage changed: the operator creates a claim of StorageClass fast, which starts empty, and moves every step onto it " +
				"(the steps' pods restart)" + retained},
		{"NFS to ExistingClaim", nfs, claim("models-a"),
			"modelStorage changed: every step moves to claim models-a (the steps' pods restart)" + retained},
		{"ExistingClaim to another", claim("models-a"), claim("models-b"),
			"modelStorage changed: every step moves to claim models-b (the steps' pods restart); claim models-a stays as it is"},
		{"ExistingClaim to NFS", claim("models-a"), nfs,
			"modelStorage changed: the operator creates a new volume and claim and moves every step onto them (the steps' pods restart); " +
				"claim models-a stays as it is"},
		{"NFS to ModelStorageClass", nfs, published("shared-models"),
			"modelStorage changed: the operator creates a new volume and claim and moves every step onto them (the steps' pods restart)" + retained},
		{"ModelStorageClass to another class", published("shared-models"), published("other-models"),
			"modelStorage changed: the operator creates a new volume and claim and moves every step onto them (the steps' pods restart)" + retained},
		{"ModelStorageClass to ExistingClaim", published("shared-models"), claim("models-a"),
			"modelStorage changed: every step moves to claim models-a (the steps' pods restart)" + retained},
		{"StorageClass with the default capacity written out", byClass, func() pipelinev1.ModelStorage {
			m := *byClass.DeepCopy()
			m.StorageClass.Capacity = ptr.To(resource.MustParse(pipelinev1.DefaultCapacity))
			return m
		}(), ""},
		{"NFS moved to another mount path", nfs, func() pipelinev1.ModelStorage {
			m := *nfs.DeepCopy()
			m.MountPath = "/srv/models"
			return m
		}(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := sampleV1(t)
			old.Spec.ModelStorage = *tc.was.DeepCopy()
			p := old.DeepCopy()
			p.Spec.ModelStorage = *tc.is.DeepCopy()
			var got []string
			for _, w := range warnings(p, old, nil, fieldNames{}) {
				if strings.HasPrefix(w, "modelStorage changed") {
					got = append(got, w)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("warnings %q, want none", got)
			case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
				t.Errorf("warnings %q, want %q", got, tc.want)
			}
		})
	}
}

// A step of the Open Inference Protocol that a later step follows in mode Chain would forward
// nothing: warned, and not in mode Router or as the last step.
func TestWarningsOpenInferenceInAChain(t *testing.T) {
	p := sampleV1(t)
	p.Spec.Steps[0].Protocol = pipelinev1.StepProtocolOpenInferenceGRPC
	p.Spec.Steps[1].Protocol = pipelinev1.StepProtocolOpenInference
	want := "step step-1 speaks the Open Inference Protocol, whose servers answer and do not forward: " +
		"in dataPath.mode Chain the next step gets no request from it; set dataPath.mode to Router"
	got := warnings(p, nil, nil, fieldNames{})
	if !slices.Contains(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
	if slices.ContainsFunc(got, func(w string) bool { return strings.HasPrefix(w, "step step-2 speaks") }) {
		t.Errorf("the last step is warned: %q", got)
	}
	routerOn(p, &pipelinev1.Router{})
	if got := warnings(p, nil, nil, fieldNames{}); slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, "Open Inference") }) {
		t.Errorf("warned in mode Router: %q", got)
	}
}

// Inputs from the request and from an earlier Open Inference Protocol step, over gRPC or REST,
// are admitted, and a step may not name itself.
func TestValidateTensorInputs(t *testing.T) {
	p := sampleV1(t)
	routerOn(p, nil)
	p.Spec.Steps[0].Protocol = pipelinev1.StepProtocolOpenInferenceGRPC
	p.Spec.Steps[1].Protocol = pipelinev1.StepProtocolOpenInference
	first := p.Spec.Steps[0].Name
	p.Spec.Steps[1].Inputs = []pipelinev1.StepTensorInput{{Name: "a", Step: first, Tensor: "y"}, {Name: "b", Tensor: "input0"}}
	if errs := ValidatePipeline(p); len(errs) != 0 {
		t.Fatalf("refused: %v", errs)
	}
	p.Spec.Steps[1].Inputs[0].Step = p.Spec.Steps[1].Name
	errs := ValidatePipeline(p)
	if len(errs) != 1 || errs[0].Field != "spec.steps[1].inputs[0].step" || !strings.Contains(errs[0].Error(), "cannot take an input from its own answer") {
		t.Fatalf("errors %v", errs)
	}
}
