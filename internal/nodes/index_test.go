package nodes

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func namedNode(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func hostnamed(name, hostname string) *corev1.Node {
	return namedNode(name, map[string]string{corev1.LabelHostname: hostname})
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

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// readers are the same objects behind a client with the index and one without (which
// Resolve reads as before the index).
func readers(t *testing.T, objs ...client.Object) map[string]client.Reader {
	t.Helper()
	s := testScheme(t)
	return map[string]client.Reader{
		"indexed": fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
			WithIndex(&corev1.Node{}, IndexHostname, NodeHostname).Build(),
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

func TestIndexMissing(t *testing.T) {
	r := readers(t)["without the indexes"]
	err := r.List(context.Background(), &corev1.NodeList{}, client.MatchingFields{IndexHostname: "n1"})
	if !IndexMissing(err) {
		t.Errorf("IndexMissing(%v) = false for a reader without the index", err)
	}
	if IndexMissing(nil) {
		t.Error("IndexMissing(nil) = true")
	}
	if IndexMissing(context.Canceled) {
		t.Error("IndexMissing(context.Canceled) = true: other errors must not be hidden")
	}
}
