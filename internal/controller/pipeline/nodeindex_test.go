package pipeline

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
)

// pipelineOnNodes is a Pipeline in ns with one step per location list (its location first, then
// its fallbackLocations) and the data path dataPath.
func pipelineOnNodes(ns, name string, dataPath *pipelinev1.DataPath, steps ...[]string) *pipelinev1.Pipeline {
	p := &pipelinev1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for i, l := range steps {
		s := pipelinev1.Step{Name: "step-" + strconv.Itoa(i+1), Image: "nginx:latest", Model: "m"}
		if len(l) > 0 {
			s.Location, s.FallbackLocations = l[0], l[1:]
		}
		p.Spec.Steps = append(p.Spec.Steps, s)
	}
	p.Spec.DataPath = dataPath
	return p
}

// routedBy is dataPath.mode Router with the router's settings r (nil: the defaults).
func routedBy(r *pipelinev1.Router) *pipelinev1.DataPath {
	return &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeRouter, Router: r}
}

// chainedWith is dataPath.mode Chain with the router's settings r, which no router reads.
func chainedWith(r *pipelinev1.Router) *pipelinev1.DataPath {
	return &pipelinev1.DataPath{Mode: pipelinev1.DataPathModeChain, Router: r}
}

func labelledNode(name, hostname string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: hostname}}}
}

func TestPipelineNodes(t *testing.T) {
	tests := []struct {
		name string
		p    *pipelinev1.Pipeline
		want []string
	}{
		{"no location", pipelineOnNodes("ns", "p", nil, nil, nil), nil},
		{"each step's location", pipelineOnNodes("ns", "p", nil, []string{"a"}, nil, []string{"b"}), []string{"a", "b"}},
		{"locations and fallbackLocations, each once", pipelineOnNodes("ns", "p", nil, []string{"a", "b", "c"}, []string{"b", "a"}),
			[]string{"a", "b", "c"}},
		{"fallbackLocations without location count for nothing, as Step.Locations says", pipelineOnNodes("ns", "p", nil,
			[]string{"", "b"}), nil},
		{"the router's location with mode Router", pipelineOnNodes("ns", "p", routedBy(&pipelinev1.Router{Location: "r"}), []string{"a"}),
			[]string{"a", "r"}},
		{"the router's location once", pipelineOnNodes("ns", "p", routedBy(&pipelinev1.Router{Location: "a"}), []string{"a"}), []string{"a"}},
		{"a router without location", pipelineOnNodes("ns", "p", routedBy(&pipelinev1.Router{}), []string{"a"}), []string{"a"}},
		{"a router without settings", pipelineOnNodes("ns", "p", routedBy(nil), []string{"a"}), []string{"a"}},
		{"not the router's location with mode Chain", pipelineOnNodes("ns", "p", chainedWith(&pipelinev1.Router{Location: "r"}), []string{"a"}),
			[]string{"a"}},
		{"the router's location and fallbackLocations, each once", pipelineOnNodes("ns", "p",
			routedBy(&pipelinev1.Router{Location: "r", FallbackLocations: []string{"a", "s"}}), []string{"a"}),
			[]string{"a", "r", "s"}},
		{"not the router's fallbackLocations with mode Chain", pipelineOnNodes("ns", "p",
			chainedWith(&pipelinev1.Router{Location: "r", FallbackLocations: []string{"s"}}), []string{"a"}), []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pipelineNodes(tt.p); !slices.Equal(got, tt.want) {
				t.Errorf("pipelineNodes = %q, want %q", got, tt.want)
			}
		})
	}
	if got := pipelineNodes(&corev1.Node{}); got != nil {
		t.Errorf("pipelineNodes(node) = %q, want none", got)
	}
}

// pipelineIndexReaders are the same objects behind a client with indexPipelineNodes and one
// without it (which pipelinesOn scans).
func pipelineIndexReaders(t *testing.T, objs ...client.Object) map[string]client.Reader {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := pipelinev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return map[string]client.Reader{
		"indexed": fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
			WithIndex(&pipelinev1.Pipeline{}, indexPipelineNodes, pipelineNodes).Build(),
		"without the index": fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build(),
	}
}

func TestPipelinesOn(t *testing.T) {
	objs := []client.Object{
		pipelineOnNodes("a", "on-location", nil, []string{"n1"}),
		pipelineOnNodes("b", "on-fallback", nil, []string{"n2", "n1"}),
		pipelineOnNodes("a", "router-on", routedBy(&pipelinev1.Router{Location: "n1"}), []string{"n2"}),
		pipelineOnNodes("a", "router-chained", chainedWith(&pipelinev1.Router{Location: "n1"}), []string{"n2"}),
		pipelineOnNodes("a", "on-hostname", nil, []string{"host-3"}),
		pipelineOnNodes("b", "on-name", nil, nil, []string{"n3"}),
		pipelineOnNodes("b", "on-both", nil, []string{"n3", "host-3"}),
		pipelineOnNodes("a", "elsewhere", nil, []string{"n9"}),
	}
	keys := func(names ...string) []string { return names }
	tests := []struct {
		node *corev1.Node
		want []string
	}{
		{labelledNode("n1", "n1"), keys("a/on-location", "b/on-fallback", "a/router-on")},
		{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, keys("a/on-location", "b/on-fallback", "a/router-on")},
		{labelledNode("n3", "host-3"), keys("a/on-hostname", "b/on-name", "b/on-both")},
		{labelledNode("n8", "n8"), nil},
	}
	for name, r := range pipelineIndexReaders(t, objs...) {
		t.Run(name, func(t *testing.T) {
			for _, tt := range tests {
				got, err := pipelinesOn(context.Background(), r, tt.node)
				if err != nil {
					t.Fatalf("pipelinesOn(%s): %v", tt.node.Name, err)
				}
				if g := sortedNames(got); !slices.Equal(g, sortedNames(nil, tt.want...)) {
					t.Errorf("pipelinesOn(%s %v) = %q, want %q", tt.node.Name, tt.node.Labels, g, sortedNames(nil, tt.want...))
				}
			}
		})
	}
}

func TestSetupPipelineIndex(t *testing.T) {
	indexer := &recordingIndexer{}
	if err := setupPipelineIndex(context.Background(), indexer); err != nil {
		t.Fatal(err)
	}
	if len(indexer.fields) != 1 || indexer.fields[0] != indexPipelineNodes {
		t.Errorf("indexed %q, want %q", indexer.fields, indexPipelineNodes)
	}
	if _, ok := indexer.objects[0].(*pipelinev1.Pipeline); !ok {
		t.Errorf("indexed %T, want the cached v1 Pipeline", indexer.objects[0])
	}
}

// recordingIndexer records the fields it is asked to index.
type recordingIndexer struct {
	objects []client.Object
	fields  []string
}

func (r *recordingIndexer) IndexField(_ context.Context, obj client.Object, field string, _ client.IndexerFunc) error {
	r.objects, r.fields = append(r.objects, obj), append(r.fields, field)
	return nil
}

// sortedNames are the keys, and the names more, as namespace/name, sorted; never nil.
func sortedNames(keys []types.NamespacedName, more ...string) []string {
	out := slices.Clone(more)
	for _, k := range keys {
		out = append(out, k.String())
	}
	slices.SortFunc(out, strings.Compare)
	if out == nil {
		out = []string{}
	}
	return out
}
