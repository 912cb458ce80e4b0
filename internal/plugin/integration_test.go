package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// plugin runs `kubectl pipeline args...` in this process against the cluster of kubeconfig and
// returns its standard output and error.
func plugin(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := NewCommand(Env{
		IOStreams:  genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		Getenv:     func(string) string { return "" },
		IsTerminal: func(io.Writer) bool { return false },
		Now:        time.Now,
	})
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := cmd.ExecuteContext(ctx)
	return out.String() + errOut.String(), err
}

// v1beta1OnlyCRD is the Pipeline CRD of a cluster whose operator serves only v1beta1, as 0.1.0
// did: this release's CRD with its v1beta1 schema, stored as v1beta1, without v1 and without
// conversion, and not deprecated.
func v1beta1OnlyCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	crd := testenv.PipelineCRD(t)
	crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name != VersionV1beta1 })
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("the CRD has no version %s", VersionV1beta1)
	}
	crd.Spec.Versions[0].Served, crd.Spec.Versions[0].Storage = true, true
	crd.Spec.Versions[0].Deprecated, crd.Spec.Versions[0].DeprecationWarning = false, nil
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	return crd
}

// TestIntegrationV1beta1Server runs the plugin against a real kube-apiserver whose Pipeline CRD
// serves v1beta1 alone: it finds that by discovery, reads the status in v1beta1's shape, and
// pauses, resumes and asks for a failback with v1beta1's annotations.
func TestIntegrationV1beta1Server(t *testing.T) {
	testenv.RequireAssets(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := &envtest.Environment{CRDs: []*apiextensionsv1.CustomResourceDefinition{v1beta1OnlyCRD(t)}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	core := kubernetes.NewForConfigOrDie(cfg)
	if _, err := core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The fixture as the operator 0.1.0 holds it: created without the annotations, its status
	// written through the status subresource.
	dyn := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: Group, Version: VersionV1beta1, Resource: resource}).Namespace("team-a")
	want := fixture(t, "pipeline-v1beta1.yaml")
	obj := want.DeepCopy()
	obj.SetAnnotations(nil)
	unstructured.RemoveNestedField(obj.Object, "status")
	created, err := dyn.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Object["status"] = want.Object["status"]
	if _, err := dyn.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) string {
		t.Helper()
		out, err := plugin(ctx, kubeconfig, args...)
		if err != nil {
			t.Fatalf("kubectl pipeline %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	annotations := func() map[string]string {
		t.Helper()
		u, err := dyn.Get(ctx, "faces", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u.GetAnnotations()
	}

	out := run("-n", "team-a", "status", "faces", "-o", "json")
	var doc Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(doc.Items) != 1 {
		t.Fatalf("%d items:\n%s", len(doc.Items), out)
	}
	got := doc.Items[0]
	if got.ServedVersion != VersionV1beta1 || got.Phase != "Creating" || got.Paused || got.Failover.Failback != "Manual" ||
		got.ReadySteps == nil || *got.ReadySteps != 1 || got.TotalSteps == nil || *got.TotalSteps != 2 ||
		len(got.Steps) != 2 || !got.Steps[0].OnFallback || got.Steps[0].Node != "edge-b" || got.Steps[1].DeploymentState != "Progressing" ||
		got.Router == nil || got.Router.State != "Available" {
		t.Errorf("status read from a v1beta1 server:\n%s", out)
	}
	if tree := run("-n", "team-a", "status"); !strings.Contains(tree, "team-a/faces  Creating  1/2 steps ready  (v1beta1, generation 1, observed 3)") {
		t.Errorf("the tree of the namespace:\n%s", tree)
	}
	if tree := run("status", "-A"); !strings.Contains(tree, "team-a/faces") {
		t.Errorf("the tree of every namespace:\n%s", tree)
	}

	t.Run("status --watch draws again on a change and ends when interrupted", func(t *testing.T) {
		watchCtx, stop := context.WithCancel(ctx)
		defer stop()
		var out testenv.SyncBuffer
		cmd := NewCommand(Env{IOStreams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out},
			Getenv: func(string) string { return "" }, IsTerminal: func(io.Writer) bool { return false }, Now: time.Now})
		cmd.SetArgs([]string{"--kubeconfig", kubeconfig, "-n", "team-a", "status", "faces", "--watch"})
		done := make(chan error, 1)
		go func() { done <- cmd.ExecuteContext(watchCtx) }()
		waitFor := func(what string, ok func(string) bool) {
			t.Helper()
			for deadline := time.Now().Add(30 * time.Second); !ok(out.String()); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no %s in:\n%s", what, out.String())
				}
			}
		}
		waitFor("first drawing", func(s string) bool { return strings.Contains(s, "team-a/faces  Creating") })
		u, err := dyn.Get(ctx, "faces", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, "running", "status", "phase"); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor("drawing of the change", func(s string) bool { return strings.Contains(s, "team-a/faces  Running") })
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("interrupted, --watch returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("--watch did not end when interrupted")
		}
		if n := strings.Count(out.String(), "team-a/faces  "); n < 2 {
			t.Errorf("%d drawings, want the first and one per change:\n%s", n, out.String())
		}
		// Back as the rest of the test expects it.
		u, err = dyn.Get(ctx, "faces", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(u.Object, "creating", "status", "phase")
		if _, err := dyn.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	// Shell completion of a NAME asks the cluster for the namespace's Pipelines.
	if out := run("-n", "team-a", "__complete", "pause", "fa"); !strings.HasPrefix(out, "faces\n:4\n") {
		t.Errorf("completion of pause fa:\n%s", out)
	}
	if out := run("-n", "team-a", "__complete", "status", "x"); !strings.HasPrefix(out, ":4\n") {
		t.Errorf("completion of status x:\n%s", out)
	}

	out = run("-n", "team-a", "pause", "faces")
	if a := annotations(); a[PausedAnnotation] != "true" || !strings.Contains(out, "pipeline team-a/faces paused") {
		t.Errorf("after pause, annotations %v; printed:\n%s", a, out)
	}
	if out := run("-n", "team-a", "pause", "faces"); !strings.Contains(out, "already paused (by annotation "+PausedAnnotation+")") {
		t.Errorf("pause of a paused Pipeline printed:\n%s", out)
	}
	out = run("-n", "team-a", "resume", "faces")
	if a := annotations(); a[PausedAnnotation] != "" || !strings.Contains(out, "resumed") {
		t.Errorf("after resume, annotations %v; printed:\n%s", a, out)
	}
	if out := run("-n", "team-a", "resume", "faces"); !strings.Contains(out, "is not paused") {
		t.Errorf("resume of a running Pipeline printed:\n%s", out)
	}
	out = run("-n", "team-a", "failback", "faces")
	if a := annotations(); a[FailbackAnnotation] != "true" || !strings.Contains(out, "failback requested") {
		t.Errorf("after failback, annotations %v; printed:\n%s", a, out)
	}
	if out := run("-n", "team-a", "failback", "faces"); !strings.Contains(out, "already requested") {
		t.Errorf("a second failback printed:\n%s", out)
	}
	if out, err := plugin(ctx, kubeconfig, "-n", "team-a", "pause", "nope"); err == nil || !strings.Contains(err.Error(), `pipeline "nope" not found in namespace "team-a"`) {
		t.Errorf("pause of a Pipeline that does not exist: %v\n%s", err, out)
	}
	if out, err := plugin(ctx, kubeconfig, "-n", "team-a", "trace", "nope", "req-1"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("trace of a Pipeline that does not exist: %v\n%s", err, out)
	}

	// A status that carries escape sequences, as a container's termination message quoted in a
	// condition can, reaches the terminal escaped, in the tree and in the JSON document.
	tenant := want.DeepCopy()
	tenant.SetName("tenant")
	tenant.SetAnnotations(nil)
	unstructured.RemoveNestedField(tenant.Object, "status")
	created, err = dyn.Create(ctx, tenant, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := want.DeepCopy().Object["status"].(map[string]any)
	conditions := status["conditions"].([]any)
	conditions[1].(map[string]any)["message"] = "step 1 (detect): " + hostile
	status["detailPhase"].(map[string]any)["stepsPhase"].([]any)[1].(map[string]any)["node"] = "edge-c\x1b]0;x\a"
	created.Object["status"] = status
	if _, err := dyn.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"status", "tenant"}, {"status"}, {"status", "-A"}, {"status", "tenant", "-o", "json"}} {
		out := run(append([]string{"-n", "team-a"}, args...)...)
		assertTerminalSafe(t, "kubectl pipeline "+strings.Join(args, " "), out)
		if !strings.Contains(out, "Y3VybCBldmlsLnNofHNo") || !strings.Contains(out, "edge-c") {
			t.Errorf("kubectl pipeline %s lost the text of the status:\n%s", strings.Join(args, " "), out)
		}
	}
	if err := json.Unmarshal([]byte(run("-n", "team-a", "status", "tenant", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if got, want := doc.Items[0].Conditions[1].Message, "step 1 (detect): "+strings.Replace(hostile, "\xff\xfe", "\ufffd\ufffd", 1); got != want {
		t.Errorf("the JSON document's message is %q, want %q as stored", got, want)
	}
}
