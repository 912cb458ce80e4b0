package admission

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/config/samples"
)

// A Pipeline stored before a check existed (here: an image with a trailing space) can still
// get labels, annotations and finalizers; a change of its spec must then pass every check.
func TestValidateUpdateChecksOnlyChangedSpecs(t *testing.T) {
	stored, err := samples.Pipeline("default")
	if err != nil {
		t.Fatal(err)
	}
	stored.Spec.Steps[0].Image = "nginx:latest "
	v := &Validator{}
	ctx := context.Background()

	labelled := stored.DeepCopy()
	labelled.Labels = map[string]string{"team": "vision"}
	labelled.Annotations = map[string]string{pipelinev1.PausedAnnotation: "true"}
	if _, err := v.ValidateUpdate(ctx, stored, labelled); err != nil {
		t.Fatalf("a metadata-only update was refused: %v", err)
	}

	edited := labelled.DeepCopy()
	edited.Spec.Steps[1].Model = "facedetection-3"
	_, err = v.ValidateUpdate(ctx, stored, edited)
	if err == nil || !strings.Contains(err.Error(), "spec.steps[0].image") {
		t.Fatalf("a spec update kept an invalid image: %v", err)
	}
}

func TestNFSShareMayEndInASlash(t *testing.T) {
	p, err := samples.Pipeline("default")
	if err != nil {
		t.Fatal(err)
	}
	for share, ok := range map[string]bool{"/exports/models/": true, "/": true, "/exports/../models": false, "/exports//models": false} {
		p.Spec.ModelStorage.CSIParameter["share"] = share
		if errs := ValidatePipeline(p); (len(errs) == 0) != ok {
			t.Errorf("share %q: errors %v, want accepted %t", share, errs, ok)
		}
	}
}

// Every stopWhen is compiled with the router's own compiler: what the router would refuse at
// start-up is refused at admission, with the compiler's message and the field's path.
func TestValidateCompilesStopWhen(t *testing.T) {
	p, err := samples.Pipeline("default")
	if err != nil {
		t.Fatal(err)
	}
	for expr, want := range map[string]string{
		`status == 200 && response.faces == 0`: "",
		`has(response.done) && response.done`:  "",
		`response.faces ==`:                    "Syntax error",
		`status + 1`:                           "must be a bool",
		`nosuchvariable > 1`:                   "undeclared reference",
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

func TestValidateRouterResources(t *testing.T) {
	p, err := samples.Pipeline("default")
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Router = &pipelinev1.Router{Enabled: true, Resources: &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
	}}
	errs := ValidatePipeline(p)
	if len(errs) != 1 || errs[0].Field != "spec.router.resources.requests[memory]" || !strings.Contains(errs[0].Error(), "must not exceed the limit 128Mi") {
		t.Fatalf("errors %v, want one on spec.router.resources.requests[memory]", errs)
	}
	p.Spec.Router.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("512Mi")
	if errs := ValidatePipeline(p); len(errs) != 0 {
		t.Fatalf("valid router resources refused: %v", errs)
	}
}

// A header the router sets itself cannot be passed on from the caller.
func TestValidateRouterPropagateHeaders(t *testing.T) {
	p, err := samples.Pipeline("default")
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Router = &pipelinev1.Router{Enabled: true, PropagateHeaders: []pipelinev1.HeaderName{"X-User", "X-Request-Id"}}
	errs := ValidatePipeline(p)
	if len(errs) != 1 || errs[0].Field != "spec.router.propagateHeaders[1]" || !strings.Contains(errs[0].Error(), "set by the router itself") {
		t.Fatalf("errors %v, want one on spec.router.propagateHeaders[1]", errs)
	}
	p.Spec.Router.PropagateHeaders = p.Spec.Router.PropagateHeaders[:1]
	if errs := ValidatePipeline(p); len(errs) != 0 {
		t.Fatalf("a plain header refused: %v", errs)
	}
}

// The nodes a step or the router may run on, fallbacks included, are node names; the schema's
// pattern lets a..b through.
func TestValidateNodeNames(t *testing.T) {
	p, err := samples.Pipeline("default")
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Steps[0].FallbackLocations = []string{"edge-b", "edge..c"}
	p.Spec.Router = &pipelinev1.Router{Enabled: true, Location: "edge..a", FallbackLocations: []string{"edge-b", "-x"}}
	var fields []string
	for _, e := range ValidatePipeline(p) {
		if !strings.Contains(e.Error(), "not a valid node name") {
			t.Errorf("unexpected error %v", e)
		}
		fields = append(fields, e.Field)
	}
	want := []string{"spec.steps[0].fallbackLocations[1]", "spec.router.location", "spec.router.fallbackLocations[1]"}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Errorf("errors on %v, want %v", fields, want)
	}
	p.Spec.Steps[0].FallbackLocations = []string{"edge-b", "edge.c"}
	p.Spec.Router = &pipelinev1.Router{Enabled: true, Location: "edge-a", FallbackLocations: []string{"edge-b"}}
	if errs := ValidatePipeline(p); len(errs) != 0 {
		t.Fatalf("valid node names refused: %v", errs)
	}
}

// Removing autoscaling brings the step back to its replicas at once: the update says so.
func TestValidateUpdateWarnsWhenAutoscalingIsRemoved(t *testing.T) {
	stored, err := samples.Pipeline("default")
	if err != nil {
		t.Fatal(err)
	}
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
	found := false
	for _, w := range warnings {
		found = found || strings.Contains(w, want)
	}
	if !found {
		t.Errorf("warnings %q, want one containing %q", warnings, want)
	}
}

func TestWarningsKnowFallbackLocations(t *testing.T) {
	p, err := samples.Pipeline("default")
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Steps[0].Location = "edge-a"
	p.Spec.Steps[1].Location = "edge-a"
	p.Spec.Steps[1].FallbackLocations = []string{"edge-b"}
	p.Spec.ModelStorage.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	none := func(string) (bool, error) { return false, nil }
	got := strings.Join(warnings(p, nil, none), "\n")
	for _, want := range []string{
		`step step-1: no node "edge-a" exists yet: the step stays pending until it joins the cluster`,
		"modelStorage.accessModes ReadWriteOnce: steps may run on 2 different nodes (their locations and fallbackLocations) " +
			"and cannot all mount the volume",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings %q do not say %q", got, want)
		}
	}

	p.Spec.Steps[0].Location = "edge-c"
	p.Spec.Steps[1].Location = "edge-a"
	got = strings.Join(warnings(p, nil, none), "\n")
	want := `step step-2: no node "edge-a" exists yet: the step starts on the first ready node of its fallbackLocations ` +
		"and moves to edge-a once it joins the cluster as spec.failover.failback says"
	if !strings.Contains(got, want) {
		t.Errorf("warnings %q do not say %q", got, want)
	}

	p.Spec.Router = &pipelinev1.Router{Enabled: true, Location: "edge-r"}
	got = strings.Join(warnings(p, nil, none), "\n")
	if want := `router: no node "edge-r" exists yet: the router stays pending until it joins the cluster`; !strings.Contains(got, want) {
		t.Errorf("warnings %q do not say %q", got, want)
	}
	p.Spec.Router.FallbackLocations = []string{"edge-s"}
	got = strings.Join(warnings(p, nil, none), "\n")
	if want := `router: no node "edge-r" exists yet: the router starts on the first ready node of its fallbackLocations ` +
		"and moves to edge-r once it joins the cluster as spec.failover.failback says"; !strings.Contains(got, want) {
		t.Errorf("warnings %q do not say %q", got, want)
	}
	some := func(string) (bool, error) { return true, nil }
	if got := warnings(p, nil, some); slices.ContainsFunc(got, func(w string) bool { return strings.HasPrefix(w, "router:") }) {
		t.Errorf("warnings %q about a router whose node exists", got)
	}
}

// The warning about a storage change says what becomes of the old storage, truthfully for each
// type: nfs and csi volumes are deleted with the models left on their server (reclaim policy
// Retain), a user's claim stays, and a change that keeps the claim warns of nothing.
func TestStorageChangeWarnings(t *testing.T) {
	nfs := pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeNFS,
		CSIParameter: map[string]string{"server": "10.0.0.2", "share": "/models"}}
	otherNFS := pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeNFS,
		CSIParameter: map[string]string{"server": "10.0.0.3", "share": "/models"}}
	byClass := pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeStorageClass, StorageClassName: "fast"}
	claimA := pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeExistingClaim, ClaimName: "models-a"}
	claimB := pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeExistingClaim, ClaimName: "models-b"}
	published := pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeModelStorageClass, ModelStorageClassName: "shared-models"}
	otherPublished := pipelinev1.ModelStorage{Type: pipelinev1.StorageTypeModelStorageClass, ModelStorageClassName: "other-models"}
	const retained = "; then it deletes the old volume and claim, whose reclaim policy Retain leaves the models on the NFS or CSI storage"
	for _, tc := range []struct {
		name    string
		was, is pipelinev1.ModelStorage
		want    string // empty: no storage warning
	}{
		{"nfs to another export", nfs, otherNFS,
			"modelStorage changed: the operator creates a new volume and claim and moves every step onto them (the steps' pods restart)" + retained},
		{"nfs to storageClass", nfs, byClass,
			"modelStorage changed: the operator creates a claim of StorageClass fast, which starts empty, and moves every step onto it " +
				"(the steps' pods restart)" + retained},
		{"nfs to existingClaim", nfs, claimA,
			"modelStorage changed: every step moves to claim models-a (the steps' pods restart)" + retained},
		{"existingClaim to another", claimA, claimB,
			"modelStorage changed: every step moves to claim models-b (the steps' pods restart); claim models-a stays as it is"},
		{"existingClaim to nfs", claimA, nfs,
			"modelStorage changed: the operator creates a new volume and claim and moves every step onto them (the steps' pods restart); " +
				"claim models-a stays as it is"},
		{"nfs to modelStorageClass", nfs, published,
			"modelStorage changed: the operator creates a new volume and claim and moves every step onto them (the steps' pods restart)" + retained},
		{"modelStorageClass to another class", published, otherPublished,
			"modelStorage changed: the operator creates a new volume and claim and moves every step onto them (the steps' pods restart)" + retained},
		{"modelStorageClass to existingClaim", published, claimA,
			"modelStorage changed: every step moves to claim models-a (the steps' pods restart)" + retained},
		{"storageClass with a claimName it does not read", byClass, func() pipelinev1.ModelStorage {
			m := byClass
			m.ClaimName = "ignored"
			return m
		}(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, err := samples.Pipeline("default")
			if err != nil {
				t.Fatal(err)
			}
			old.Spec.ModelStorage = *tc.was.DeepCopy()
			p := old.DeepCopy()
			p.Spec.ModelStorage = *tc.is.DeepCopy()
			var got []string
			for _, w := range warnings(p, old, nil) {
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
