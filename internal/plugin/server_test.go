package plugin

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	"github.com/ndsl-cn/pipeline-operator/pkg/client/clientset/versioned"
	"github.com/ndsl-cn/pipeline-operator/pkg/client/clientset/versioned/fake"

	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
)

// typedFixture is testdata/name decoded into the API's types of version.
func typedFixture(t *testing.T, name, version string) runtime.Object {
	t.Helper()
	var obj runtime.Object = &pipelinev1.Pipeline{}
	if version == VersionV1beta1 {
		obj = &pipelinev1beta1.Pipeline{}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(fixture(t, name).Object, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// named is a copy of the Pipeline obj as namespace/name.
func named(obj runtime.Object, namespace, name string) runtime.Object {
	c := obj.DeepCopyObject()
	m := c.(metav1.Object)
	m.SetNamespace(namespace)
	m.SetName(name)
	return c
}

// The server reads, lists and patches Pipelines through the generated client of its version:
// the summary of what it reads is the mapping's, lists are sorted by namespace and name, a
// missing Pipeline is said so, and pause, resume and failback send their merge patch to that
// version's pipelines.
func TestServerOnTheGeneratedClientset(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ version, file string }{
		{VersionV1, "pipeline-v1.yaml"},
		{VersionV1beta1, "pipeline-v1beta1.yaml"},
	} {
		t.Run(c.version, func(t *testing.T) {
			faces := typedFixture(t, c.file, c.version)
			cs := fake.NewSimpleClientset(named(faces, "team-b", "alpha"), faces, named(faces, "team-a", "beta"))
			s := &Server{Pipelines: cs, Version: c.version}

			got, err := s.Pipeline(ctx, "team-a", "faces")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(mustMap(t, fixture(t, c.file), c.version), got); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			for ns, want := range map[string][]string{"": {"team-a/beta", "team-a/faces", "team-b/alpha"}, "team-a": {"team-a/beta", "team-a/faces"}} {
				items, err := s.List(ctx, ns)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, p := range items {
					names = append(names, p.Namespace+"/"+p.Name)
				}
				if !cmp.Equal(names, want) {
					t.Errorf("list of namespace %q: %v, want %v", ns, names, want)
				}
			}
			if _, err := s.Pipeline(ctx, "team-a", "nope"); err == nil || err.Error() != `pipeline "nope" not found in namespace "team-a"` {
				t.Errorf("a missing Pipeline: %v", err)
			}

			var out bytes.Buffer
			if err := s.Do(ctx, &out, ActionResume, "team-a", "faces"); err != nil {
				t.Fatal(err)
			}
			want, _ := Patch(ActionResume, c.version)
			actions := cs.Actions()
			patch, ok := actions[len(actions)-1].(k8stesting.PatchAction)
			if !ok || patch.GetResource().Version != c.version || patch.GetPatchType() != types.MergePatchType || string(patch.GetPatch()) != want {
				t.Errorf("resume sent %#v, want the merge patch %s of version %s", actions[len(actions)-1], want, c.version)
			}
			if !strings.Contains(out.String(), "pipeline team-a/faces resumed") {
				t.Errorf("resume printed:\n%s", out.String())
			}
			if p, err := s.Pipeline(ctx, "team-a", "faces"); err != nil || p.Paused {
				t.Errorf("after resume, paused %v (%v)", p.Paused, err)
			}
		})
	}

	s := &Server{Pipelines: fake.NewSimpleClientset(), Version: "v2"}
	if _, err := s.Pipeline(ctx, "team-a", "faces"); err == nil || !strings.Contains(err.Error(), `version "v2" is neither v1 nor v1beta1`) {
		t.Errorf("a Pipeline read in v2: %v", err)
	}
}

// Fields a newer release added are dropped, not refused: the generated client reads a Pipeline
// that carries fields its types do not know, in either version.
func TestServerDropsUnknownFields(t *testing.T) {
	for _, c := range []struct{ version, file string }{
		{VersionV1, "pipeline-v1.yaml"},
		{VersionV1beta1, "pipeline-v1beta1.yaml"},
	} {
		t.Run(c.version, func(t *testing.T) {
			u := fixture(t, c.file)
			want := mustMap(t, u, c.version)
			newer := u.DeepCopy()
			for _, path := range [][]string{{"spec", "fromANewerRelease"}, {"status", "fromANewerRelease"}} {
				if err := unstructured.SetNestedField(newer.Object, map[string]any{"enabled": true}, path...); err != nil {
					t.Fatal(err)
				}
			}
			body, err := newer.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			path := "/apis/" + Group + "/" + c.version + "/namespaces/team-a/pipelines/faces"
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != path {
					t.Errorf("unexpected request %s %s", r.Method, r.URL)
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			cs, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			got, err := (&Server{Pipelines: cs, Version: c.version}).Pipeline(context.Background(), "team-a", "faces")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
		})
	}
}
