package apply

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

func TestContains(t *testing.T) {
	tests := []struct {
		name       string
		have, want any
		ok         bool
	}{
		{"equal scalars", "a", "a", true},
		{"different scalars", "a", "b", false},
		{"extra map keys are someone else's", map[string]any{"a": 1.0, "b": 2.0}, map[string]any{"a": 1.0}, true},
		{"missing map key", map[string]any{"b": 2.0}, map[string]any{"a": 1.0}, false},
		{"lists must match in length", []any{"a", "b"}, []any{"a"}, false},
		{"list elements may carry defaults", []any{map[string]any{"name": "x", "protocol": "TCP"}}, []any{map[string]any{"name": "x"}}, true},
		{"list element changed", []any{map[string]any{"name": "y"}}, []any{map[string]any{"name": "x"}}, false},
		{"type mismatch", "a", map[string]any{}, false},
		{"an omitted empty field matches an empty value", map[string]any{}, map[string]any{"storageClassName": ""}, true},
		{"an omitted field does not match a value", map[string]any{}, map[string]any{"storageClassName": "fast"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := contains(tt.have, tt.want, fieldType{}); got != tt.ok {
				t.Errorf("contains(%v, %v) = %v, want %v", tt.have, tt.want, got, tt.ok)
			}
		})
	}
}

// TestContainsMergesLikeTheAPIServer checks the comparison against the apiserver's schema: the
// entries of list-maps are found by their keys, whatever else the list holds, and atomic lists
// stay atomic.
func TestContainsMergesLikeTheAPIServer(t *testing.T) {
	p := testenv.Sample(t, "default")
	a, err := newAppliedObject(resources.StepDeployment(p, 0, "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*appsv1.Deployment)
		ok   bool
	}{
		{"as applied", func(*appsv1.Deployment) {}, true},
		{"someone else's env var", func(d *appsv1.Deployment) {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Env = append([]corev1.EnvVar{{Name: "INJECTED", Value: "1"}}, c.Env...)
		}, true},
		{"env vars in another order", func(d *appsv1.Deployment) {
			env := d.Spec.Template.Spec.Containers[0].Env
			env[0], env[len(env)-1] = env[len(env)-1], env[0]
		}, true},
		{"someone else's sidecar and volume", func(d *appsv1.Deployment) {
			pod := &d.Spec.Template.Spec
			pod.Containers = append(pod.Containers, corev1.Container{Name: "proxy", Image: "proxy:1"})
			pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "tokens"})
		}, true},
		{"a port's protocol defaulted", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolTCP
		}, true},
		{"one of the operator's env vars changed", func(d *appsv1.Deployment) {
			env := d.Spec.Template.Spec.Containers[0].Env
			for i := range env {
				if env[i].Name == pipelinev1.EnvModelName {
					env[i].Value = "other"
				}
			}
		}, false},
		{"one of the operator's env vars removed", func(d *appsv1.Deployment) {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Env = c.Env[1:]
		}, false},
		{"the port's protocol changed", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolUDP
		}, false},
		{"someone else's command and args (the operator sets neither)", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Command = []string{"sh"}
			d.Spec.Template.Spec.Containers[0].Args = append(d.Spec.Template.Spec.Containers[0].Args, "-v")
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := testenv.Typed[appsv1.Deployment](t, a.content)
			tt.edit(d)
			if ok, err := a.upToDate(d); err != nil || ok != tt.ok {
				t.Errorf("upToDate = %v (%v), want %v", ok, err, tt.ok)
			}
		})
	}

	// An atomic list the operator sets must match as a whole: the apply would replace it.
	p.Spec.Steps[0].Tolerations = []corev1.Toleration{{Key: "edge", Operator: corev1.TolerationOpExists}}
	b, err := newAppliedObject(resources.StepDeployment(p, 0, "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	d := testenv.Typed[appsv1.Deployment](t, b.content)
	if ok, _ := b.upToDate(d); !ok {
		t.Fatal("the applied Deployment with tolerations is not up to date")
	}
	d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations, corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists})
	if ok, _ := b.upToDate(d); ok {
		t.Error("a toleration added to the atomic list went unnoticed")
	}
}

func TestUpToDate(t *testing.T) {
	p := testenv.Sample(t, "default")
	a, err := newAppliedObject(resources.StepDeployment(p, 0, "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	// What the apiserver would hold after the apply: the applied content plus defaults.
	d := testenv.Typed[appsv1.Deployment](t, a.content)
	d.Spec.RevisionHistoryLimit = new(int32)
	d.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	if ok, err := a.upToDate(d); err != nil || !ok {
		t.Fatalf("applied object with defaults is not up to date: %v %v", ok, err)
	}

	drifted := d.DeepCopy()
	drifted.Spec.Template.Spec.Containers[0].Image = "nginx:1.0"
	if ok, _ := a.upToDate(drifted); ok {
		t.Errorf("an edited image went unnoticed")
	}

	// A spec that drops a field changes the hash even though the old object contains the new one.
	p.Spec.Steps[0].Env = nil // the listenPort entry, v1beta1's arg
	b, err := newAppliedObject(resources.StepDeployment(p, 0, "", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if b.hash == a.hash {
		t.Fatalf("different configurations share hash %s", a.hash)
	}
	if ok, _ := b.upToDate(d); ok {
		t.Errorf("a removed env entry went unnoticed")
	}
}

func TestCachedDeploymentsStayComparable(t *testing.T) {
	p := testenv.Sample(t, "default")
	a, err := newAppliedObject(resources.StepDeployment(p, 0, resources.PodSecurityRestricted, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	// The Deployment as the apiserver returns it: the applied content, defaults and managedFields.
	d := testenv.Typed[appsv1.Deployment](t, a.content)
	d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: FieldManager}}
	pod := &d.Spec.Template.Spec
	pod.RestartPolicy, pod.DNSPolicy, pod.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, "default-scheduler"
	pod.TerminationGracePeriodSeconds = ptr.To[int64](30)
	pod.Containers[0].TerminationMessagePath = "/dev/termination-log"
	pod.Containers[0].ImagePullPolicy = corev1.PullAlways

	obj, err := StripDeployment(d)
	if err != nil {
		t.Fatal(err)
	}
	cached := obj.(*appsv1.Deployment)
	if len(cached.ManagedFields) != 0 || cached.Spec.Template.Spec.DNSPolicy != "" || cached.Spec.Template.Spec.Containers[0].ImagePullPolicy != "" {
		t.Errorf("defaults or managedFields kept: %+v", cached.Spec.Template.Spec)
	}
	if ok, err := a.upToDate(cached); err != nil || !ok {
		t.Errorf("a stripped Deployment no longer matches what was applied: %v %v", ok, err)
	}
	if reflect.ValueOf(cached.Spec.Template.Labels).Pointer() != reflect.ValueOf(cached.Labels).Pointer() {
		t.Errorf("the pod template's labels are a second copy of the Deployment's")
	}
	if cached.Spec.Template.Spec.SecurityContext != sharedPodSecurity ||
		cached.Spec.Template.Spec.Containers[0].SecurityContext != sharedContainerSecurity[1] {
		t.Errorf("the operator's security contexts are not shared in the cache")
	}

	// A step's own security context stays its own.
	p.Spec.Steps[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}
	own := testenv.Typed[appsv1.Deployment](t, must(newAppliedObject(resources.StepDeployment(p, 0, resources.PodSecurityRestricted, "", ""))).content)
	obj, err = StripDeployment(own)
	if err != nil {
		t.Fatal(err)
	}
	if sc := obj.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 {
		t.Errorf("a step's own security context was replaced: %+v", sc)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestKeepCreatedMarker(t *testing.T) {
	fields := metav1.NewFieldsV1(`{"f:spec":{}}`)
	tests := []struct {
		name    string
		managed []metav1.ManagedFieldsEntry
		marked  bool
	}{
		{"created, never updated", []metav1.ManagedFieldsEntry{
			{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields},
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: fields},
		}, true},
		{"created and applied since", []metav1.ManagedFieldsEntry{
			{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: fields},
			{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields},
		}, true},
		{"handed over to the apply", []metav1.ManagedFieldsEntry{
			{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: fields},
		}, false},
		{"someone else's update", []metav1.ManagedFieldsEntry{
			{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields},
		}, false},
		{"the operator's status write", []metav1.ManagedFieldsEntry{
			{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: fields},
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := KeepCreatedMarker(&corev1.Service{ObjectMeta: metav1.ObjectMeta{ManagedFields: tt.managed}})
			if err != nil {
				t.Fatal(err)
			}
			got := obj.(*corev1.Service).ManagedFields
			switch {
			case tt.marked && (len(got) != 1 || &got[0] != &createdMarker[0]):
				t.Errorf("managedFields = %+v, want the shared marker", got)
			case !tt.marked && got != nil:
				t.Errorf("managedFields = %+v, want none", got)
			}
			if hasCreatedFields(obj.(*corev1.Service)) != tt.marked {
				t.Errorf("hasCreatedFields after the transform = %v, want %v", !tt.marked, tt.marked)
			}
		})
	}
}
