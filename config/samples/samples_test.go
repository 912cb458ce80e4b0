package samples

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	pipelinev1 "github.com/ndsl-cn/pipeline-operator/api/v1"
	pipelinev1beta1 "github.com/ndsl-cn/pipeline-operator/api/v1beta1"
	"github.com/ndsl-cn/pipeline-operator/internal/resources"
	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/stopwhen"
)

// TestPipelineV1IsTheDesignSample keeps the v1 sample the same Pipeline as the v1beta1 one: the
// v1beta1 sample converted to v1 is the v1 sample, but for the listenPort variable, which the
// conversion keeps as an env entry (it was an arg) and v1 no longer reads.
func TestPipelineV1IsTheDesignSample(t *testing.T) {
	old, err := Pipeline("ns")
	if err != nil {
		t.Fatal(err)
	}
	want, err := PipelineV1("ns")
	if err != nil {
		t.Fatal(err)
	}
	got := old.DeepCopy()
	if len(got.Spec.Steps[0].Env) != 1 || got.Spec.Steps[0].Env[0].Name != "listenPort" || got.Spec.Steps[0].Env[0].Value != "9080" {
		t.Fatalf("the converted first step's env is %v, want listenPort=9080 alone", got.Spec.Steps[0].Env)
	}
	if lead := got.LeadingEnv(0); len(lead) != 1 || lead[0] != "listenPort" {
		t.Fatalf("the converted first step's leading env is %v, want listenPort: it was an arg", lead)
	}
	got.Spec.Steps[0].Env = nil
	if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("the v1beta1 sample converted to v1 differs from the v1 sample:\n%s", diff.Diff(want.Spec, got.Spec))
	}
}

// kwokNodes are the nodes of the local control plane (hack/localcluster) that the samples pin
// their steps and routers to.
var kwokNodes = sets.New("xx-test-node236", "xx-test-node239")

// seed is the v1beta1 Pipeline users hold: with seedClass, the samples in another version than v1.
const seed = "distri-infer_v1beta1_pipeline.yaml"

// seedClass is the v1beta1 ModelStorageClass release 0.2.0 shipped, the same as the v1 sample's.
const seedClass = "distri-infer_v1beta1_modelstorageclass.yaml"

// decoded is a sample decoded into its v1 type: a Pipeline or a ModelStorageClass.
type decoded struct {
	file     string
	pipeline *pipelinev1.Pipeline
	class    *pipelinev1.ModelStorageClass
}

// decodeAll decodes every sample strictly into its v1 type; the seed is decoded as v1beta1 and
// converted, as the apiserver stores it.
func decodeAll(t *testing.T) []decoded {
	t.Helper()
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("Files lists %d samples: the embed pattern matches almost nothing", len(files))
	}
	var out []decoded
	for _, f := range files {
		d, err := decode(f)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		out = append(out, d)
	}
	return out
}

// decode decodes sample f strictly into its v1 type.
func decode(f File) (decoded, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(f.Data, &tm); err != nil {
		return decoded{}, err
	}
	d := decoded{file: f.Name}
	spoke := tm.APIVersion == pipelinev1beta1.GroupVersion.String()
	switch {
	case f.Name == seed && spoke && tm.Kind == "Pipeline":
		old := &pipelinev1beta1.Pipeline{}
		if err := yaml.UnmarshalStrict(f.Data, old); err != nil {
			return d, err
		}
		d.pipeline = &pipelinev1.Pipeline{}
		if err := old.ConvertTo(d.pipeline); err != nil {
			return d, fmt.Errorf("convert to v1: %w", err)
		}
		return d, nil
	case tm.APIVersion == pipelinev1.GroupVersion.String() && tm.Kind == "Pipeline":
		d.pipeline = &pipelinev1.Pipeline{}
		return d, yaml.UnmarshalStrict(f.Data, d.pipeline)
	case f.Name == seedClass && spoke && tm.Kind == "ModelStorageClass":
		if err := yaml.UnmarshalStrict(f.Data, &pipelinev1beta1.ModelStorageClass{}); err != nil {
			return d, err
		}
		// The two versions have one schema: the apiserver stores the v1beta1 class as it is.
		d.class = &pipelinev1.ModelStorageClass{}
		return d, yaml.UnmarshalStrict(f.Data, d.class)
	case tm.APIVersion == pipelinev1.GroupVersion.String() && tm.Kind == "ModelStorageClass":
		d.class = &pipelinev1.ModelStorageClass{}
		return d, yaml.UnmarshalStrict(f.Data, d.class)
	}
	return d, fmt.Errorf("a %s %s: samples other than the seeds are written in %s", tm.APIVersion, tm.Kind, pipelinev1.GroupVersion)
}

// storageMembers are the members of the storage union that m sets, by the type that names each.
func storageMembers(m *pipelinev1.ModelStorage) []pipelinev1.ModelStorageType {
	var set []pipelinev1.ModelStorageType
	for typ, member := range map[pipelinev1.ModelStorageType]bool{
		pipelinev1.ModelStorageTypeNFS:               m.NFS != nil,
		pipelinev1.ModelStorageTypeCSI:               m.CSI != nil,
		pipelinev1.ModelStorageTypeStorageClass:      m.StorageClass != nil,
		pipelinev1.ModelStorageTypeExistingClaim:     m.ExistingClaim != nil,
		pipelinev1.ModelStorageTypeModelStorageClass: m.ModelStorageClass != nil,
	} {
		if member {
			set = append(set, typ)
		}
	}
	return set
}

// checkPipeline checks what the CRD's rules and the webhooks would check of p that a test without
// an apiserver can: one storage member, the one type names; nodes of the local control plane;
// stopWhen and propagated headers the router accepts.
func checkPipeline(t *testing.T, file string, p *pipelinev1.Pipeline) {
	t.Helper()
	if got := storageMembers(&p.Spec.ModelStorage); len(got) != 1 || got[0] != p.Spec.ModelStorage.Type {
		t.Errorf("%s: modelStorage.type %s sets the members %v, want %[2]s alone", file, p.Spec.ModelStorage.Type, got)
	}
	var nodes []string
	for _, s := range p.Spec.Steps {
		nodes = append(nodes, s.Locations()...)
		if s.StopWhen != "" {
			if _, err := stopwhen.Compile(s.StopWhen); err != nil {
				t.Errorf("%s: step %s: stopWhen: %v", file, s.Name, err)
			}
		}
		if s.Autoscaling != nil && s.Replicas != nil {
			t.Errorf("%s: step %s sets replicas and autoscaling", file, s.Name)
		}
	}
	if p.Spec.RouterEnabled() {
		// What the operator gives the router of this Pipeline, the router takes, with every
		// step's tensor mapping.
		cfg := resources.RouterConfig(p, "")
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: the router refuses its configuration: %v", file, err)
		}
		for i, s := range p.Spec.Steps {
			var want []routerconfig.TensorInput
			for _, in := range s.Inputs {
				want = append(want, routerconfig.TensorInput{Name: in.Name, Step: in.Step, Tensor: in.Tensor})
			}
			if got := cfg.Steps[i].Inputs; !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("%s: step %s: the router maps the inputs %v, want %v", file, s.Name, got, want)
			}
		}
	}
	if rt := p.Spec.RouterSettings(); rt != nil {
		nodes = append(nodes, rt.Locations()...)
		for _, h := range rt.PropagateHeaders {
			if err := routerconfig.CheckPropagatedHeader(string(h)); err != nil {
				t.Errorf("%s: dataPath.router.propagateHeaders: %v", file, err)
			}
		}
	}
	for _, n := range nodes {
		if !kwokNodes.Has(n) {
			t.Errorf("%s pins to node %s, not one of the local control plane's %v", file, n, sets.List(kwokNodes))
		}
	}
}

// Every sample decodes strictly into its v1 type (the seed through the conversion), Default
// completes it as the defaulting webhook would, and a second Default changes nothing. Every
// Pipeline has a name of its own but the seed's v1 twin.
func TestEverySampleDecodesStrictlyAndDefaults(t *testing.T) {
	names := map[string]string{}
	for _, d := range decodeAll(t) {
		if d.class != nil {
			if d.class.Spec.NamespaceSelector == nil || (d.class.Spec.NFS == nil) == (d.class.Spec.CSI == nil) {
				t.Errorf("%s: a ModelStorageClass needs a namespaceSelector and exactly one of nfs and csi", d.file)
			}
			continue
		}
		p := d.pipeline
		checkPipeline(t, d.file, p)
		p.Default()
		for _, s := range p.Spec.Steps {
			if s.Port == nil || (s.Autoscaling == nil) == (s.Replicas == nil) {
				t.Errorf("%s: step %s after Default: port %v, replicas %v, autoscaling %v", d.file, s.Name, s.Port, s.Replicas, s.Autoscaling)
			}
		}
		again := p.DeepCopy()
		again.Default()
		if !equality.Semantic.DeepEqual(again.Spec, p.Spec) {
			t.Errorf("%s: a second Default changed the spec:\n%s", d.file, diff.Diff(p.Spec, again.Spec))
		}
		if other, ok := names[p.Name]; ok && (p.Name != "facedetection-pipeline" || !slices.Contains([]string{other, d.file}, seed)) {
			t.Errorf("%s and %s are both named %s", other, d.file, p.Name)
		}
		names[p.Name] = d.file
	}
}

// There is a v1 sample of every capability: the router, tensor mapping between Open Inference
// Protocol steps, autoscaling, failover with
// fallbackLocations, a NodePort entry with an Ingress, and every kind of model storage, the
// ModelStorageClass one naming the sample class.
func TestEveryCapabilityHasASample(t *testing.T) {
	class, err := ModelStorageClass()
	if err != nil {
		t.Fatal(err)
	}
	have := sets.New[string]()
	for _, d := range decodeAll(t) {
		p := d.pipeline
		if p == nil || d.file == seed {
			continue
		}
		spec := &p.Spec
		have.Insert("storage " + string(spec.ModelStorage.Type))
		if spec.RouterEnabled() {
			have.Insert("router")
		}
		if e := spec.Expose; e != nil && e.ServiceType == pipelinev1.ServiceTypeNodePort && e.Ingress != nil {
			have.Insert("NodePort and ingress")
		}
		for _, s := range spec.Steps {
			if s.Autoscaling != nil {
				have.Insert("autoscaling")
			}
			if len(s.Inputs) > 0 && slices.ContainsFunc(s.Inputs, func(in pipelinev1.StepTensorInput) bool { return in.Step != "" }) {
				have.Insert("tensor mapping")
			}
			if len(s.FallbackLocations) > 0 {
				have.Insert("fallbackLocations")
			}
		}
		if m := spec.ModelStorage.ModelStorageClass; m != nil && m.Name != class.Name {
			t.Errorf("%s names the ModelStorageClass %s; the sample class is %s", d.file, m.Name, class.Name)
		}
	}
	want := sets.New("router", "autoscaling", "fallbackLocations", "NodePort and ingress", "tensor mapping")
	for _, typ := range []pipelinev1.ModelStorageType{pipelinev1.ModelStorageTypeNFS, pipelinev1.ModelStorageTypeCSI,
		pipelinev1.ModelStorageTypeStorageClass, pipelinev1.ModelStorageTypeExistingClaim, pipelinev1.ModelStorageTypeModelStorageClass} {
		want.Insert("storage " + string(typ))
	}
	if missing := want.Difference(have); missing.Len() > 0 {
		t.Errorf("no v1 sample shows %v", sets.List(missing))
	}
}

// The kustomization, which makes the samples the OLM bundle's alm-examples, lists every sample.
func TestKustomizationListsEverySample(t *testing.T) {
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatal(err)
	}
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if got, want := sets.List(sets.New(k.Resources...)), sets.List(sets.New(names...)); !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml lists %v, the samples are %v", got, want)
	}
}
