package realnodes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// modelsDir is the model repository the nodes' PersistentVolumes publish: the models shipped
// with the reference model server.
func modelsDir(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join(clusterDir, "models"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(abs, os.DirFS(filepath.Join("..", "..", "examples", "modelserver", "models"))); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	return abs
}

// createModels makes examples/iris/models.yaml in ns: the claim iris-models of a read-only
// PersistentVolume of the model repository.
func createModels(t *testing.T, ns string) {
	t.Helper()
	docs := modelsManifest(t, ns)
	applyDocs(t, docs, "PersistentVolume")
	applyDocs(t, docs, "PersistentVolumeClaim")
}

// modelsManifest is examples/iris/models.yaml for ns, its documents decoded.
func modelsManifest(t *testing.T, ns string) []map[string]any {
	t.Helper()
	path := filepath.Join("..", "..", "examples", "iris", "models.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := modelsDir(t)
	return decodeDocuments(t, path, []byte(os.Expand(string(data), func(k string) string {
		return map[string]string{"NAMESPACE": ns, "MODELS_DIR": dir}[k]
	})))
}

// applyDocs applies the documents of a kind, deleting them when the test ends.
func applyDocs(t *testing.T, docs []map[string]any, kind string) {
	t.Helper()
	for _, doc := range docs {
		if doc["kind"] != kind {
			continue
		}
		file := filepath.Join(t.TempDir(), "doc.yaml")
		writeYAML(t, file, doc)
		if _, err := kubectlRun("apply", "-f", file); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = kubectlRun("delete", "--wait=false", "-f", file) })
	}
}

// stepStates follows the states of a Pipeline's steps until it is Running, recording each
// state each step was seen in, in order (loadingWithSince for a Loading that says since when).
// loadingWithSince is, in what stepStates saw, a Loading step whose status says since when its
// model loads (status.steps[].loadingSince, and in its message).
const loadingWithSince pipelinev1.StepState = "Loading (since)"

func stepStates(t *testing.T, key types.NamespacedName, timeout time.Duration) map[string][]pipelinev1.StepState {
	t.Helper()
	seen := map[string][]pipelinev1.StepState{}
	p := &pipelinev1.Pipeline{}
	eventually(t, timeout, "Pipeline "+key.String()+" Running", func() error {
		if err := admin.Get(context.Background(), key, p); err != nil {
			return err
		}
		for _, s := range p.Status.Steps {
			state := s.State
			if state == pipelinev1.StepStateLoading && s.LoadingSince != nil && strings.Contains(s.Message, "; loading since ") {
				// A Loading that says since when: its model server's container's start, as the
				// kubelet reports it.
				state = loadingWithSince
			}
			if states := seen[s.Name]; state != "" && (len(states) == 0 || states[len(states)-1] != state) {
				seen[s.Name] = append(states, state)
			}
		}
		if p.Status.Phase != pipelinev1.PipelinePhaseRunning {
			return errorsf("phase %s, steps %s", p.Status.Phase, joined(p.Status.Steps, func(s pipelinev1.StepStatus) string {
				return fmt.Sprintf("%s %s %s", s.Name, s.State, s.Message)
			}))
		}
		return nil
	})
	return seen
}

// The iris Pipeline of examples/iris: two model servers on two real nodes, loading their models
// from a PersistentVolume, each Loading while its model loads and then Ready by the kubelet's
// own probes on the protocol's default paths; the router on node-a carries a request to both,
// by their Service names through the cluster's DNS and kube-proxy, and the answer names the
// species of each flower.
func TestIrisPipelineAnswersAcrossNodes(t *testing.T) {
	ns := namespace(t, "iris")
	createModels(t, ns)
	p := irisPipeline(ns)
	for i := range p.Spec.Steps {
		// Loading takes long enough to be seen: the operator looks at pods that run but are not
		// ready at least every 15 s (it does not watch pods).
		p.Spec.Steps[i].Args = []string{"-load-delay=25s"}
	}
	start := time.Now()
	if err := admin.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	seen := stepStates(t, types.NamespacedName{Namespace: ns, Name: p.Name}, 3*time.Minute)
	t.Logf("Running %s after it was created; steps went through %v", time.Since(start).Round(time.Second), seen)
	for _, step := range []string{"scale", "classify"} {
		states := seen[step]
		loading := slices.Index(states, loadingWithSince)
		ready := slices.Index(states, pipelinev1.StepStateReady)
		if loading < 0 || ready < loading {
			t.Errorf("step %s went through %v, want Loading (saying since when) and then Ready", step, states)
		}
	}
	got := p.DeepCopy()
	if err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: p.Name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.OperatorVersion != os.Getenv("REALNODES_VERSION") {
		t.Errorf("status.operatorVersion %q, want the release of the image, %s", got.Status.OperatorVersion, os.Getenv("REALNODES_VERSION"))
	}
	for _, s := range got.Status.Steps {
		want := map[string]string{"scale": nodeA, "classify": nodeB}[s.Name]
		if s.Node != want {
			t.Errorf("step %s runs on %q, want %s", s.Name, s.Node, want)
		}
	}
	pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
			t.Errorf("pod %s on %s is %s with IP %q", pod.Name, pod.Spec.NodeName, pod.Status.Phase, pod.Status.PodIP)
		}
	}

	flowers := `[[5.1, 3.5, 1.4, 0.2], [6.0, 2.7, 4.5, 1.5], [6.9, 3.1, 5.8, 2.2]]`
	start = time.Now()
	answer := infer(t, fmt.Sprintf("http://%s-router.%s.svc.cluster.local", p.Name, ns),
		`{"inputs":[{"name":"features","datatype":"FP32","shape":[3,4],"data":`+flowers+`}]}`)
	t.Logf("answered in %s: %s", time.Since(start).Round(time.Millisecond), answer)
	var out struct {
		Outputs []struct {
			Name string          `json:"name"`
			Data json.RawMessage `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(answer, &out); err != nil {
		t.Fatalf("the answer is not an inference response: %v: %s", err, answer)
	}
	labels := ""
	for _, o := range out.Outputs {
		if o.Name == "label" {
			labels = string(o.Data)
		}
	}
	if want := `["setosa","versicolor","virginica"]`; labels != want {
		t.Errorf("labels %s, want %s", labels, want)
	}
}

// infer posts an inference request to a URL by its name in the cluster, retrying while the
// name or the route is not there yet (a Service's rules reach kube-proxy a moment after the
// Pipeline reports Running).
func infer(t *testing.T, url, body string) []byte {
	t.Helper()
	var answer []byte
	hc := clusterHTTP()
	eventually(t, 30*time.Second, "POST "+url, func() error {
		resp, err := hc.Post(url, "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		answer, err = io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return errorsf("%s: %s", resp.Status, answer)
		}
		return nil
	})
	return answer
}

// A step whose model is not in the repository: its server exits at start, and the kubelet's
// crash loop makes the step Failed with the kubelet's reason and the server's own message.
func TestCrashLoopingStepFails(t *testing.T) {
	ns := namespace(t, "crash")
	createModels(t, ns)
	p := irisPipeline(ns)
	p.Spec.Steps[1].Model = "no-such-model"
	p.Spec.Steps[1].Args = []string{"-load-delay=0s"}
	if err := admin.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "step classify Failed", func() error {
		got := &pipelinev1.Pipeline{}
		if err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: p.Name}, got); err != nil {
			return err
		}
		for _, s := range got.Status.Steps {
			if s.Name != "classify" {
				continue
			}
			if s.State == pipelinev1.StepStateFailed && s.Reason == "CrashLoopBackOff" && strings.Contains(s.Message, "no model in /models/no-such-model") {
				t.Logf("step classify: %s %s: %s", s.State, s.Reason, s.Message)
				return nil
			}
			return errorsf("step classify is %s (%s): %s", s.State, s.Reason, s.Message)
		}
		return errorsf("no status of step classify yet")
	})
}
