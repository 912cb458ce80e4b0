package nodes

import (
	"context"
	"slices"
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
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/hub"
)

func namedNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func hostnamed(name, hostname string) *corev1.Node {
	return namedNode(name, map[string]string{corev1.LabelHostname: hostname})
}

// pipeline is a Pipeline in ns with one step per location list (its location first, then its
// fallbackLocations) and, when router is not nil, the router.
func pipeline(ns, name string, router *pipelinev1beta1.Router, steps ...[]string) *pipelinev1beta1.Pipeline {
	p := &pipelinev1beta1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, l := range steps {
		s := pipelinev1beta1.Step{Image: "nginx:latest", Model: "m"}
		if len(l) > 0 {
			s.Location, s.FallbackLocations = l[0], l[1:]
		}
		p.Spec.Steps = append(p.Spec.Steps, s)
	}
	p.Spec.Router = router
	return p
}

func TestNodeHostname(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want []string
	}{
		{"the label", hostnamed("n1", "n1"), []string{"n1"}},
		{"the label, not the name", hostnamed("n1", "host-1"), []string{"host-1"}},
		{"no label: no value, as a label selector did not match it", namedNode("n1", map[string]string{"zone": "a"}), nil},
		{"an empty label is a value, as a label selector matched it", hostnamed("n1", ""), []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NodeHostname(tt.node); !slices.Equal(got, tt.want) {
				t.Errorf("NodeHostname = %q, want %q", got, tt.want)
			}
		})
	}
	if got := NodeHostname(&corev1.Pod{}); got != nil {
		t.Errorf("NodeHostname(pod) = %q, want none", got)
	}
}

func TestHostname(t *testing.T) {
	if got := Hostname(hostnamed("n1", "host-1")); got != "host-1" {
		t.Errorf("Hostname = %q, want the label", got)
	}
	if got := Hostname(namedNode("n1", nil)); got != "n1" {
		t.Errorf("Hostname = %q, want the name", got)
	}
	if got := Hostname(hostnamed("n1", "")); got != "n1" {
		t.Errorf("Hostname of an empty label = %q, want the name", got)
	}
}

func TestPipelineNodes(t *testing.T) {
	enabled := func(location string) *pipelinev1beta1.Router {
		return &pipelinev1beta1.Router{Enabled: true, Location: location}
	}
	tests := []struct {
		name string
		p    *pipelinev1beta1.Pipeline
		want []string
	}{
		{"no location", pipeline("ns", "p", nil, nil, nil), nil},
		{"each step's location", pipeline("ns", "p", nil, []string{"a"}, nil, []string{"b"}), []string{"a", "b"}},
		{"locations and fallbackLocations, each once", pipeline("ns", "p", nil, []string{"a", "b", "c"}, []string{"b", "a"}),
			[]string{"a", "b", "c"}},
		{"fallbackLocations without location count for nothing, as Step.Locations says", pipeline("ns", "p", nil,
			[]string{"", "b"}), nil},
		{"the router's location when it is enabled", pipeline("ns", "p", enabled("r"), []string{"a"}), []string{"a", "r"}},
		{"the router's location once", pipeline("ns", "p", enabled("a"), []string{"a"}), []string{"a"}},
		{"an enabled router without location", pipeline("ns", "p", enabled(""), []string{"a"}), []string{"a"}},
		{"not the location of a disabled router", pipeline("ns", "p", &pipelinev1beta1.Router{Location: "r"}, []string{"a"}),
			[]string{"a"}},
		{"the router's location and fallbackLocations, each once", pipeline("ns", "p",
			&pipelinev1beta1.Router{Enabled: true, Location: "r", FallbackLocations: []string{"a", "s"}}, []string{"a"}),
			[]string{"a", "r", "s"}},
		{"not the fallbackLocations of a disabled router", pipeline("ns", "p",
			&pipelinev1beta1.Router{Location: "r", FallbackLocations: []string{"s"}}, []string{"a"}), []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PipelineNodes(tt.p); !slices.Equal(got, tt.want) {
				t.Errorf("PipelineNodes = %q, want %q", got, tt.want)
			}
		})
	}
	if got := PipelineNodes(&corev1.Node{}); got != nil {
		t.Errorf("PipelineNodes(node) = %q, want none", got)
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := pipelinev1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := pipelinev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// readers are the same objects behind a client with the indexes and one without (which the
// Resolve and PipelinesOn read as before the indexes).
func readers(t *testing.T, objs ...client.Object) map[string]client.Reader {
	t.Helper()
	s := testScheme(t)
	// Pipelines are read as the apiserver stores them.
	for i, o := range objs {
		if p, ok := o.(*pipelinev1beta1.Pipeline); ok {
			h, err := hub.ToHub(p)
			if err != nil {
				t.Fatal(err)
			}
			objs[i] = h
		}
	}
	return map[string]client.Reader{
		"indexed": fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
			WithIndex(&corev1.Node{}, IndexHostname, NodeHostname).
			WithIndex(hub.Object(), IndexPipelineNodes, StoredPipelineNodes).Build(),
		"without the indexes": fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build(),
	}
}

func TestResolve(t *testing.T) {
	objs := []client.Object{
		hostnamed("n1", "n1"),
		hostnamed("n2-b", "shared"), hostnamed("n2-a", "shared"),
		hostnamed("n3", "host-3"),
		namedNode("n4", nil),
		// n6 gives itself the hostname label of n5: the name wins.
		hostnamed("n5", "n5"), hostnamed("n6", "n5"),
	}
	tests := []struct {
		location  string
		name      string
		found     string
		ambiguous []string
	}{
		{location: "n1", name: "n1", found: "n1"},
		{location: "host-3", name: "n3", found: "n3"},
		{location: "n3", name: "n3", found: "n3"},
		{location: "n4", name: "n4", found: "n4"},
		{location: "n5", name: "n5", found: "n5"},
		{location: "shared", name: "shared", ambiguous: []string{"n2-a", "n2-b"}},
		{location: "nowhere", name: "nowhere"},
	}
	for name, r := range readers(t, objs...) {
		t.Run(name, func(t *testing.T) {
			for _, tt := range tests {
				res, err := Resolve(context.Background(), r, tt.location)
				if err != nil {
					t.Fatalf("Resolve(%s): %v", tt.location, err)
				}
				found := ""
				if res.Node != nil {
					found = res.Node.Name
				}
				if res.Location != tt.location || res.Name != tt.name || found != tt.found || !slices.Equal(res.Ambiguous, tt.ambiguous) {
					t.Errorf("Resolve(%s) = name %q, node %q, ambiguous %q; want %q, %q, %q",
						tt.location, res.Name, found, res.Ambiguous, tt.name, tt.found, tt.ambiguous)
				}
				if res.Found() != (tt.found != "") {
					t.Errorf("Resolve(%s).Found() = %v", tt.location, res.Found())
				}
				if (res.AmbiguousMessage() != "") != (tt.ambiguous != nil) {
					t.Errorf("Resolve(%s).AmbiguousMessage() = %q", tt.location, res.AmbiguousMessage())
				}
				if ok, err := Exists(context.Background(), r, tt.location); err != nil || ok != (tt.found != "" || tt.ambiguous != nil) {
					t.Errorf("Exists(%s) = %v, %v", tt.location, ok, err)
				}
			}
		})
	}
}

func TestAmbiguousMessage(t *testing.T) {
	res := Resolution{Location: "edge-1", Name: "edge-1", Ambiguous: []string{"edge-1a", "rogue"}}
	want := "location edge-1 is ambiguous: no node is named edge-1 and nodes edge-1a, rogue all carry the label " +
		"kubernetes.io/hostname=edge-1, so none of them is chosen (the pods stay Pending, pinned to a node named edge-1); " +
		"set the location to the name of the node"
	if got := res.AmbiguousMessage(); got != want {
		t.Errorf("AmbiguousMessage() = %q, want %q", got, want)
	}
}

func TestPipelinesOn(t *testing.T) {
	objs := []client.Object{
		pipeline("a", "on-location", nil, []string{"n1"}),
		pipeline("b", "on-fallback", nil, []string{"n2", "n1"}),
		pipeline("a", "router-on", &pipelinev1beta1.Router{Enabled: true, Location: "n1"}, []string{"n2"}),
		pipeline("a", "router-disabled", &pipelinev1beta1.Router{Location: "n1"}, []string{"n2"}),
		pipeline("a", "on-hostname", nil, []string{"host-3"}),
		pipeline("b", "on-name", nil, nil, []string{"n3"}),
		pipeline("b", "on-both", nil, []string{"n3", "host-3"}),
		pipeline("a", "elsewhere", nil, []string{"n9"}),
	}
	keys := func(names ...string) []string { return names }
	tests := []struct {
		node *corev1.Node
		want []string
	}{
		{hostnamed("n1", "n1"), keys("a/on-location", "b/on-fallback", "a/router-on")},
		{namedNode("n1", nil), keys("a/on-location", "b/on-fallback", "a/router-on")},
		{hostnamed("n3", "host-3"), keys("a/on-hostname", "b/on-name", "b/on-both")},
		{hostnamed("n8", "n8"), nil},
	}
	for name, r := range readers(t, objs...) {
		t.Run(name, func(t *testing.T) {
			for _, tt := range tests {
				got, err := PipelinesOn(context.Background(), r, tt.node)
				if err != nil {
					t.Fatalf("PipelinesOn(%s): %v", tt.node.Name, err)
				}
				if g := sortedKeys(got); !slices.Equal(g, sorted(tt.want)) {
					t.Errorf("PipelinesOn(%s %v) = %q, want %q", tt.node.Name, tt.node.Labels, g, sorted(tt.want))
				}
			}
		})
	}
}

func TestIndexMissing(t *testing.T) {
	r := readers(t)["without the indexes"]
	err := r.List(context.Background(), &corev1.NodeList{}, client.MatchingFields{IndexHostname: "n1"})
	if !indexMissing(err) {
		t.Errorf("indexMissing(%v) = false for a reader without the index", err)
	}
	if indexMissing(nil) {
		t.Error("indexMissing(nil) = true")
	}
	if indexMissing(context.Canceled) {
		t.Error("indexMissing(context.Canceled) = true: other errors must not be hidden")
	}
}

func sortedKeys(keys []types.NamespacedName) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.String())
	}
	return sorted(out)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.SortFunc(s, strings.Compare)
	if s == nil {
		s = []string{}
	}
	return s
}
