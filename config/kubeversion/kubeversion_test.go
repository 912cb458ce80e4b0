package kubeversion

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// root is the repository, from this package's directory (go test runs there).
var root = filepath.Join("..", "..")

// ownGroup is the API group of the operator's own CustomResourceDefinitions: its kinds are served
// wherever those CRDs are installed, which the manifests that use them ship too.
const ownGroup = "distri-infer.ndsl.cn"

// Sources of the figures below:
//   - guide: the Deprecated API Migration Guide,
//     https://kubernetes.io/docs/reference/using-api/deprecation-guide/ — for each removed
//     version it names the version to migrate to and the release it is "available since";
//   - changelog: the release's CHANGELOG in kubernetes/kubernetes (CHANGELOG/CHANGELOG-1.N.md),
//     for APIs that replaced no removed version.
var (
	coreV1       = "1.0"  // the v1 API of Kubernetes 1.0 (changelog: CHANGELOG-1.0)
	appsV1       = "1.9"  // guide, v1.16: "apps/v1 API version, available since v1.9"
	rbacV1       = "1.8"  // guide, v1.22: "rbac.authorization.k8s.io/v1 API version, available since v1.8"
	crdV1        = "1.16" // guide, v1.22: "apiextensions.k8s.io/v1 API version, available since v1.16"
	webhookV1    = "1.16" // guide, v1.22: "admissionregistration.k8s.io/v1 API version, available since v1.16"
	policyVAPV1  = "1.30" // changelog: CHANGELOG-1.30, ValidatingAdmissionPolicy graduated to GA (KEP-3488), admissionregistration.k8s.io/v1
	netpolV1     = "1.8"  // guide, v1.16: "networking.k8s.io/v1 API version, available since v1.8" (NetworkPolicy)
	ingressV1    = "1.19" // guide, v1.22: "networking.k8s.io/v1 API version, available since v1.19" (Ingress, IngressClass)
	pdbV1        = "1.21" // guide, v1.25: "policy/v1 API version, available since v1.21"
	hpaV2        = "1.23" // guide, v1.26: "autoscaling/v2 API version, available since v1.23"
	leaseV1      = "1.14" // changelog: CHANGELOG-1.14, the Lease API graduated to coordination.k8s.io/v1
	eventsV1     = "1.19" // guide, v1.25: "events.k8s.io/v1 API version, available since v1.19"
	authnzV1     = "1.6"  // guide, v1.22: "authentication.k8s.io/v1 ... authorization.k8s.io/v1 API version, available since v1.6"
	selfReviewV1 = "1.28" // changelog: CHANGELOG-1.28, SelfSubjectReview graduated to GA (KEP-3325), authentication.k8s.io/v1
	autoscaleV1  = "1.2"  // changelog: CHANGELOG-1.2, HorizontalPodAutoscaler (and the scale subresource) in autoscaling/v1
	discoveryV1  = "1.21" // guide, v1.25: "discovery.k8s.io/v1 API version, available since v1.21"
	admissionV1  = "1.16" // guide, v1.22: AdmissionReview "admission.k8s.io/v1 ... available since v1.16" (the webhooks' requests)
	servedSinces = map[schema.GroupVersionKind]string{}
)

func init() {
	for gv, kinds := range map[schema.GroupVersion]map[string]string{
		{Version: "v1"}: {"Namespace": coreV1, "Service": coreV1, "ServiceAccount": coreV1, "Secret": coreV1,
			"ConfigMap": coreV1, "Pod": coreV1, "Node": coreV1, "PersistentVolume": coreV1,
			"PersistentVolumeClaim": coreV1, "Event": coreV1, "Endpoints": coreV1, "PodLogOptions": coreV1},
		{Group: "apps", Version: "v1"}:                         {"Deployment": appsV1, "ReplicaSet": appsV1},
		{Group: "rbac.authorization.k8s.io", Version: "v1"}:    {"Role": rbacV1, "RoleBinding": rbacV1, "ClusterRole": rbacV1, "ClusterRoleBinding": rbacV1},
		{Group: "apiextensions.k8s.io", Version: "v1"}:         {"CustomResourceDefinition": crdV1},
		{Group: "admissionregistration.k8s.io", Version: "v1"}: {"MutatingWebhookConfiguration": webhookV1, "ValidatingWebhookConfiguration": webhookV1, "ValidatingAdmissionPolicy": policyVAPV1, "ValidatingAdmissionPolicyBinding": policyVAPV1},
		{Group: "admission.k8s.io", Version: "v1"}:             {"AdmissionReview": admissionV1},
		{Group: "networking.k8s.io", Version: "v1"}:            {"NetworkPolicy": netpolV1, "Ingress": ingressV1, "IngressClass": ingressV1},
		{Group: "policy", Version: "v1"}:                       {"PodDisruptionBudget": pdbV1},
		{Group: "autoscaling", Version: "v2"}:                  {"HorizontalPodAutoscaler": hpaV2},
		{Group: "autoscaling", Version: "v1"}:                  {"Scale": autoscaleV1},
		{Group: "coordination.k8s.io", Version: "v1"}:          {"Lease": leaseV1},
		{Group: "events.k8s.io", Version: "v1"}:                {"Event": eventsV1},
		{Group: "authentication.k8s.io", Version: "v1"}:        {"TokenReview": authnzV1, "SelfSubjectReview": selfReviewV1},
		{Group: "authorization.k8s.io", Version: "v1"}:         {"SubjectAccessReview": authnzV1},
		{Group: "discovery.k8s.io", Version: "v1"}:             {"EndpointSlice": discoveryV1},
	} {
		for kind, since := range kinds {
			servedSinces[gv.WithKind(kind)] = since
		}
	}
}

// addOns are the API groups served by something installed beside Kubernetes, not by Kubernetes
// itself: a manifest that uses them needs that installed, whatever the release.
var addOns = map[schema.GroupVersion]string{
	{Group: "operators.coreos.com", Version: "v1alpha1"}: "Operator Lifecycle Manager",
	{Group: "operators.coreos.com", Version: "v2"}:       "Operator Lifecycle Manager",
	{Group: "cert-manager.io", Version: "v1"}:            "cert-manager",
	{Group: "monitoring.coreos.com", Version: "v1"}:      "Prometheus Operator",
}

// libraryAPIs are the APIs the manager calls through its libraries rather than through types it
// names: leader election (controller-runtime's Lease lock), events (controller-runtime's
// recorder, events.k8s.io/v1), the authentication and authorization of the metrics endpoint
// (controller-runtime's filters: TokenReview, SubjectAccessReview), the webhook configurations
// whose caBundle the self-signed certificate's rotator (cert-controller) keeps, and the
// AdmissionReviews the webhooks answer.
var libraryAPIs = []schema.GroupVersionKind{
	{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
	{Group: "events.k8s.io", Version: "v1", Kind: "Event"},
	{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenReview"},
	{Group: "authorization.k8s.io", Version: "v1", Kind: "SubjectAccessReview"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
	{Group: "admission.k8s.io", Version: "v1", Kind: "AdmissionReview"},
}

// release is a Kubernetes release as major and minor.
type release struct{ major, minor int }

func parseRelease(v string) (release, error) {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return release{}, fmt.Errorf("%q is no Kubernetes release (major.minor[.patch])", v)
	}
	var r release
	var err error
	if r.major, err = strconv.Atoi(parts[0]); err != nil {
		return release{}, fmt.Errorf("%q: %w", v, err)
	}
	if r.minor, err = strconv.Atoi(parts[1]); err != nil {
		return release{}, fmt.Errorf("%q: %w", v, err)
	}
	return r, nil
}

func (r release) after(o release) bool {
	return r.major > o.major || (r.major == o.major && r.minor > o.minor)
}

func (r release) String() string { return fmt.Sprintf("%d.%d", r.major, r.minor) }

func minimum(t *testing.T) release {
	t.Helper()
	r, err := parseRelease(Minimum)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(Minimum, ".") != 2 {
		t.Fatalf("Minimum %q must be major.minor.patch, as spec.minKubeVersion takes it", Minimum)
	}
	return r
}

// servedAtMinimum explains why gvk is not served at the minimum release, or returns "". crds are
// the CustomResourceDefinitions shipped with it, which serve the operator's own kinds.
func servedAtMinimum(t *testing.T, gvk schema.GroupVersionKind, crds []*apiextensionsv1.CustomResourceDefinition) string {
	t.Helper()
	if gvk.Group == ownGroup {
		for _, crd := range crds {
			if crd.Spec.Group != gvk.Group || crd.Spec.Names.Kind != gvk.Kind {
				continue
			}
			for _, v := range crd.Spec.Versions {
				if v.Name == gvk.Version && v.Served {
					return ""
				}
			}
		}
		return fmt.Sprintf("%s: no CustomResourceDefinition shipped with it serves it", gvk)
	}
	if _, ok := addOns[gvk.GroupVersion()]; ok {
		return ""
	}
	since, ok := servedSinces[gvk]
	if !ok {
		return fmt.Sprintf("%s: not in the table of APIs and the release that first serves each (servedSinces): add it, with its source", gvk)
	}
	r, err := parseRelease(since)
	if err != nil {
		t.Fatal(err)
	}
	if min := minimum(t); r.after(min) {
		return fmt.Sprintf("%s: served since Kubernetes %s, after the minimum %s (kubeversion.Minimum)", gvk, r, min)
	}
	return ""
}

// kustomize is the kustomize binary that `make test-unit` names in $KUSTOMIZE. Run outside make
// without it, the test is skipped; run by make without it, it fails.
func kustomize(t *testing.T) string {
	t.Helper()
	if k := os.Getenv("KUSTOMIZE"); k != "" {
		return k
	}
	const msg = "KUSTOMIZE names the kustomize binary: run `make test-unit`"
	if os.Getenv("MAKELEVEL") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// decode reads every object of a multi-document YAML stream.
func decode(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// shipped is every manifest that ships, by where it comes from: the kustomize builds of
// config/default and of each overlay under config/overlays, the ClusterServiceVersion base of
// config/manifests and the files of bundle/manifests.
func shipped(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	out := map[string][]*unstructured.Unstructured{}
	dirs := []string{"config/default"}
	overlays, err := filepath.Glob(filepath.Join(root, "config", "overlays", "*", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(overlays) == 0 {
		t.Fatal("no overlay under config/overlays")
	}
	for _, o := range overlays {
		dirs = append(dirs, filepath.ToSlash(filepath.Join("config", "overlays", filepath.Base(filepath.Dir(o)))))
	}
	k := kustomize(t)
	for _, dir := range dirs {
		cmd := exec.Command(k, "build", filepath.Join(root, dir))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		data, err := cmd.Output()
		if err != nil {
			t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.String())
		}
		out["kustomize build "+dir] = decode(t, dir, data)
	}
	for _, pattern := range []string{"config/manifests/bases/*.yaml", "bundle/manifests/*.yaml"} {
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no file matches %s", pattern)
		}
		var objs []*unstructured.Unstructured
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			objs = append(objs, decode(t, f, data)...)
		}
		out[filepath.Dir(pattern)] = objs
	}
	return out
}

// csvAPIs are the APIs OLM creates for a ClusterServiceVersion: its Deployments, its roles and
// bindings, and its webhook configurations.
func csvAPIs(t *testing.T, u *unstructured.Unstructured) []schema.GroupVersionKind {
	t.Helper()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, csv); err != nil {
		t.Fatalf("ClusterServiceVersion %s: %v", u.GetName(), err)
	}
	rbac := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: kind}
	}
	var out []schema.GroupVersionKind
	install := csv.Spec.InstallStrategy.StrategySpec
	if len(install.DeploymentSpecs) > 0 {
		out = append(out, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	}
	if len(install.Permissions) > 0 {
		out = append(out, rbac("Role"), rbac("RoleBinding"))
	}
	if len(install.ClusterPermissions) > 0 {
		out = append(out, rbac("ClusterRole"), rbac("ClusterRoleBinding"))
	}
	for _, w := range csv.Spec.WebhookDefinitions {
		switch w.Type {
		case operatorsv1alpha1.ValidatingAdmissionWebhook:
			out = append(out, schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"})
		case operatorsv1alpha1.MutatingAdmissionWebhook:
			out = append(out, schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"})
		case operatorsv1alpha1.ConversionWebhook:
			out = append(out, schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		}
	}
	return out
}

func TestShippedManifestsAreServedAtTheMinimum(t *testing.T) {
	for source, objs := range shipped(t) {
		if len(objs) == 0 {
			t.Errorf("%s: no object", source)
		}
		var crds []*apiextensionsv1.CustomResourceDefinition
		for _, u := range objs {
			if u.GroupVersionKind() == apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition") {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
					t.Fatalf("%s: CustomResourceDefinition %s: %v", source, u.GetName(), err)
				}
				crds = append(crds, crd)
			}
		}
		for _, u := range objs {
			gvks := []schema.GroupVersionKind{u.GroupVersionKind()}
			if u.GroupVersionKind() == operatorsv1alpha1.SchemeGroupVersion.WithKind(operatorsv1alpha1.ClusterServiceVersionKind) {
				gvks = append(gvks, csvAPIs(t, u)...)
			}
			for _, gvk := range gvks {
				if why := servedAtMinimum(t, gvk, crds); why != "" {
					t.Errorf("%s: %s %s uses %s", source, u.GetKind(), u.GetName(), why)
				}
			}
		}
	}
}

// managerPackages are the directories and Go files (tests excluded) of the module's packages that
// the manager, the router and the kubectl plugin are built from.
func managerPackages(t *testing.T) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the manager's packages: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{.Dir}}|{{join .GoFiles ","}}{{end}}{{end}}`, "./cmd/...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		dir, files, ok := strings.Cut(line, "|")
		if !ok {
			t.Fatalf("go list printed %q", line)
		}
		if files != "" {
			pkgs[dir] = strings.Split(files, ",")
		}
	}
	return pkgs
}

// apiPackage is the package of API types an import names: the package itself for API types, the
// types' package for apply configurations of them, "" for anything else.
func apiPackage(path string) string {
	switch {
	case strings.HasPrefix(path, "k8s.io/api/"),
		path == "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1",
		strings.HasPrefix(path, "github.com/operator-framework/api/pkg/operators/"):
		return path
	case strings.HasPrefix(path, "k8s.io/client-go/applyconfigurations/"):
		return "k8s.io/api/" + strings.TrimPrefix(path, "k8s.io/client-go/applyconfigurations/")
	case path == "k8s.io/apiextensions-apiserver/pkg/client/applyconfiguration/apiextensions/v1":
		return "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	}
	return ""
}

// namedAPIs are the kinds the Go files of pkgs name, as types or apply configurations, by the
// schemes that know them, each with a file that names it.
func namedAPIs(t *testing.T, pkgs map[string][]string) map[schema.GroupVersionKind]string {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, operatorsv2.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	type typeName struct{ pkg, name string }
	kinds := map[typeName]schema.GroupVersionKind{}
	for gvk, typ := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") || typ.Kind() != reflect.Struct {
			continue
		}
		kinds[typeName{typ.PkgPath(), typ.Name()}] = gvk
	}

	out := map[schema.GroupVersionKind]string{}
	fset := token.NewFileSet()
	for dir, files := range pkgs {
		for _, name := range files {
			path := filepath.Join(dir, name)
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			local := map[string]string{} // the name a file gives an imported package → its API types' package
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				api := apiPackage(p)
				if api == "" {
					continue
				}
				n := p[strings.LastIndex(p, "/")+1:]
				if imp.Name != nil {
					n = imp.Name.Name
				}
				local[n] = api
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok {
					if gvk, ok := kinds[typeName{local[x.Name], sel.Sel.Name}]; ok {
						out[gvk] = path
					}
				}
				return true
			})
		}
	}
	return out
}

func TestManagerAPIsAreServedAtTheMinimum(t *testing.T) {
	named := namedAPIs(t, managerPackages(t))
	for _, must := range []schema.GroupVersionKind{
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
		{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
	} {
		if _, ok := named[must]; !ok {
			t.Errorf("the manager's code names no %s: the scan of its packages misses what it uses (%d kinds found)", must, len(named))
		}
	}
	for _, gvk := range libraryAPIs {
		if _, ok := named[gvk]; !ok {
			named[gvk] = "called through the manager's libraries"
		}
	}
	for gvk, where := range named {
		if why := servedAtMinimum(t, gvk, nil); why != "" {
			t.Errorf("%s (%s)", why, where)
		}
	}
}

var (
	// statedRelease is how README.md and docs/ state the minimum release.
	statedRelease = regexp.MustCompile(`Kubernetes (\d+\.\d+(?:\.\d+)?) or later`)
	// statedMinKubeVersion is how docs/ name the ClusterServiceVersion's field with its value.
	statedMinKubeVersion = regexp.MustCompile("`minKubeVersion`:? `?(\\d+\\.\\d+(?:\\.\\d+)?)")
)

func TestMinimumIsStatedAlike(t *testing.T) {
	min := minimum(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(root, "README.md")
	for _, f := range append([]string{readme}, docs...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		matches := append(statedRelease.FindAllStringSubmatch(string(data), -1), statedMinKubeVersion.FindAllStringSubmatch(string(data), -1)...)
		if f == readme && len(statedRelease.FindAllString(string(data), -1)) == 0 {
			t.Errorf("README.md does not state the minimum release as %q", "Kubernetes "+min.String()+" or later")
		}
		for _, m := range matches {
			r, err := parseRelease(m[1])
			if err != nil || r != min {
				t.Errorf("%s states %q: the minimum is Kubernetes %s (kubeversion.Minimum)", f, m[0], Minimum)
			}
		}
	}

	// The ClusterServiceVersion base, which make bundle copies into bundle/ (hack/bundle.sh
	// writes kubeversion.Minimum there too, so the bundle agrees once regenerated).
	for _, pattern := range []string{"config/manifests/bases/*.clusterserviceversion.yaml", "bundle/manifests/*.clusterserviceversion.yaml"} {
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 1 {
			t.Fatalf("%s: %d files, want 1", pattern, len(files))
		}
		data, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := yaml.Unmarshal(data, csv); err != nil {
			t.Fatal(err)
		}
		if csv.Spec.MinKubeVersion != Minimum {
			hint := ""
			if strings.HasPrefix(pattern, "bundle/") {
				hint = ": run `make bundle`"
			}
			t.Errorf("%s: spec.minKubeVersion is %q, the minimum is %q (kubeversion.Minimum)%s", files[0], csv.Spec.MinKubeVersion, Minimum, hint)
		}
	}
}
