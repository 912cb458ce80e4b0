package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"sigs.k8s.io/yaml"
)

// csvPath is where the bundle keeps its ClusterServiceVersion.
const csvPath = "bundle/manifests/pipeline-operator.clusterserviceversion.yaml"

// bundleTools returns the operator-sdk and kustomize binaries that `make test-unit` names in
// $OPERATOR_SDK and $KUSTOMIZE. Run outside make without them, the test is skipped; run by make
// without them, it fails.
func bundleTools(t *testing.T) (operatorSDK, kustomize string) {
	t.Helper()
	operatorSDK, kustomize = os.Getenv("OPERATOR_SDK"), os.Getenv("KUSTOMIZE")
	if operatorSDK != "" && kustomize != "" {
		return operatorSDK, kustomize
	}
	const msg = "OPERATOR_SDK and KUSTOMIZE name the operator-sdk and kustomize binaries of the bundle: run `make test-unit`"
	if os.Getenv("MAKELEVEL") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return "", ""
}

// projectCopy copies what hack/bundle.sh reads (config/ and PROJECT) to a temporary directory,
// so that the bundle of the test leaves the repository's config/ and bundle/ alone, and returns
// the directory.
func projectCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "config"), os.DirFS(filepath.Join("..", "..", "config"))); err != nil {
		t.Fatalf("copying config/: %v", err)
	}
	project, err := os.ReadFile(filepath.Join("..", "..", "PROJECT"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "PROJECT"), string(project), 0o644)
	return dir
}

// makeBundle runs hack/bundle.sh in dir as `make bundle IMG=image IMAGE_DIGESTS=true` does, and
// returns its output and error.
func makeBundle(t *testing.T, dir, image string) (string, error) {
	t.Helper()
	operatorSDK, kustomize := bundleTools(t)
	script, err := filepath.Abs(filepath.Join("..", "bundle.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, operatorSDK, kustomize, image, "0.1.0", "--channels=candidate", "--default-channel=candidate")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "IMAGE_DIGESTS=true")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestBundleNamesManagerImageByDigest(t *testing.T) {
	host := testRegistry(t)
	image := host + "/pipeline-operator:test"
	digest := pushRandom(t, image)
	want := host + "/pipeline-operator@" + digest.String()
	repoKustomization := readFile(t, filepath.Join("..", "..", "config", "manager", "kustomization.yaml"))

	dir := projectCopy(t)
	if out, err := makeBundle(t, dir, image); err != nil {
		t.Fatalf("hack/bundle.sh %s with IMAGE_DIGESTS=true: %v\n%s", image, err, out)
	}

	raw := readFile(t, filepath.Join(dir, csvPath))
	var csv operatorsv1alpha1.ClusterServiceVersion
	if err := yaml.Unmarshal([]byte(raw), &csv); err != nil {
		t.Fatalf("reading the CSV: %v", err)
	}
	if got := csv.Annotations["containerImage"]; got != want {
		t.Errorf("the CSV's containerImage annotation is %q, want %q", got, want)
	}
	deployments := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	if len(deployments) != 1 {
		t.Fatalf("the CSV has %d deployments, want 1", len(deployments))
	}
	var manager, router string
	for _, c := range deployments[0].Spec.Template.Spec.Containers {
		if c.Name != "manager" {
			continue
		}
		manager = c.Image
		for _, e := range c.Env {
			if e.Name == "RELATED_IMAGE_ROUTER" {
				router = e.Value
			}
		}
	}
	if manager != want {
		t.Errorf("the manager container's image is %q, want %q", manager, want)
	}
	if router != want {
		t.Errorf("RELATED_IMAGE_ROUTER is %q, want %q", router, want)
	}
	related := map[string]string{}
	for _, r := range csv.Spec.RelatedImages {
		related[r.Name] = r.Image
	}
	if len(related) != 2 || related["manager"] != want || related["router"] != want {
		t.Errorf("relatedImages are %v, want manager and router both %q", csv.Spec.RelatedImages, want)
	}
	if strings.Contains(raw, image) || strings.Contains(raw, ":test") {
		t.Errorf("the CSV still names the tag of %s:\n%s", image, raw)
	}
	if strings.Count(raw, "@"+digest.String()) != 5 {
		t.Errorf("the CSV names the digest %d times, want 5 (annotation, container, RELATED_IMAGE_ROUTER, two relatedImages):\n%s",
			strings.Count(raw, "@"+digest.String()), raw)
	}

	if got := readFile(t, filepath.Join("..", "..", "config", "manager", "kustomization.yaml")); got != repoKustomization {
		t.Errorf("the repository's config/manager/kustomization.yaml changed:\n%s", got)
	}
}

func TestBundleFailsWhenDigestIsUnknown(t *testing.T) {
	host := testRegistry(t)
	pushRandom(t, host+"/pipeline-operator:test")
	image := host + "/pipeline-operator:missing"

	dir := projectCopy(t)
	before := readFile(t, filepath.Join(dir, "config", "manager", "kustomization.yaml"))
	out, err := makeBundle(t, dir, image)
	if err == nil {
		t.Fatalf("hack/bundle.sh %s with IMAGE_DIGESTS=true succeeded, want a failure:\n%s", image, out)
	}
	if !strings.Contains(out, "the digest of "+image+" could not be resolved") {
		t.Errorf("the failure does not say that the digest of %s could not be resolved:\n%s", image, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "bundle")); !os.IsNotExist(err) {
		t.Errorf("a bundle was written although the digest is unknown (%v)", err)
	}
	if got := readFile(t, filepath.Join(dir, "config", "manager", "kustomization.yaml")); got != before {
		t.Errorf("config/manager/kustomization.yaml changed although the digest is unknown:\n%s", got)
	}
	if strings.Contains(out, "level=info") {
		t.Errorf("operator-sdk ran although the digest is unknown:\n%s", out)
	}
}
