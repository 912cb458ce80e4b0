// Package release checks what `make release` writes: a release of a test version is made with
// hack/release.sh, and every artifact must name that version and the one manager image digest,
// and every binary must be built for its platform.
package release

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

const (
	// Above every version of catalog/, so that the release is the head of its channel.
	version = "99.0.0-test.1"
	repo    = "example.com/pipeline-operator"
)

func TestRelease(t *testing.T) {
	for _, tool := range []string{"KUSTOMIZE", "HELM", "OPERATOR_SDK", "OPM", "CATALOG_SERVER"} {
		if os.Getenv(tool) == "" {
			t.Skip(tool + " and the other tools are named by the environment: run `make test-release`")
		}
	}
	out := t.TempDir()
	cmd := exec.Command("./hack/release.sh", version, repo, out)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/release.sh: %v\n%s", err, b)
	}
	digestFile, err := os.ReadFile(filepath.Join(out, "image-digest"))
	if err != nil {
		t.Fatal(err)
	}
	digest := strings.TrimSpace(string(digestFile))
	image := repo + "@" + digest
	if !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("image-digest %q", digest)
	}

	// The image layout is read, and its binaries taken out, once for every check of them.
	index, configs := layoutOf(t, out, "pipeline-operator-image.tar", "image-digest", repo+":v"+version)
	platforms := imageFiles(t, index, "65532:65532", "manager", "router", caBundle, "etc/services",
		"var/lib/dpkg/status.d/ca-certificates", "var/lib/dpkg/status.d/netbase")
	t.Run("the image: linux/amd64 and linux/arm64 as the Dockerfile makes them, each binary of its architecture and version",
		func(t *testing.T) { checkImage(t, platforms, configs) })
	t.Run("install.yaml runs the manager and the routers from the image by digest", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(out, "install.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		checkManager(t, "install.yaml", data, image)
	})
	t.Run("the chart is of the version and renders the image by digest", func(t *testing.T) { checkChart(t, out, image) })
	t.Run("the plugin's archives: each platform's binary of the version, in the krew manifest with its sha256",
		func(t *testing.T) { checkPlugin(t, out) })
	t.Run("the OLM bundle image: the ClusterServiceVersion of the version, the image by digest", func(t *testing.T) {
		checkBundle(t, out, image)
	})
	t.Run("the OLM catalog image: the bundle by digest at the channel's head, served by opm of each platform",
		func(t *testing.T) { checkCatalog(t, out) })
	t.Run("SHA256SUMS names every other file with its sum", func(t *testing.T) { checkSums(t, out) })
	t.Run("the host's manager says its version", func(t *testing.T) { checkHostManager(t, platforms["amd64"]["manager"]) })
}

// imageFiles are the files named of each platform's image of index, by architecture; each
// image runs as user.
func imageFiles(t *testing.T, index v1.ImageIndex, user string, names ...string) map[string]map[string][]byte {
	t.Helper()
	m, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]byte{}
	for _, d := range m.Manifests {
		img, err := index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if d.Platform == nil || d.Platform.OS != "linux" || cfg.Architecture != d.Platform.Architecture || cfg.Config.User != user {
			t.Errorf("image %s: platform %v, config of architecture %s, user %s", d.Digest, d.Platform, cfg.Architecture, cfg.Config.User)
			continue
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		files := map[string][]byte{}
		for _, l := range layers {
			rc, err := l.Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			maps.Copy(files, readTar(t, rc, names...))
			_ = rc.Close()
		}
		out[d.Platform.Architecture] = files
	}
	return out
}

// caBundle is where the image's base holds the CAs it trusts, as distroless/static does.
const caBundle = "etc/ssl/certs/ca-certificates.crt"

// checkImage checks each platform's image of the manager against the Dockerfile, which
// registry users build, its base (of Debian's packages) and its binaries.
func checkImage(t *testing.T, platforms map[string]map[string][]byte, configs map[string]*v1.ConfigFile) {
	for arch, files := range platforms {
		testenv.CheckLikeDockerfile(t, arch, testenv.ReadDockerfile(t, "../../Dockerfile"), configs[arch],
			func(p string) bool { return files[p] != nil })
		for _, name := range []string{"manager", "router"} {
			checkBinary(t, arch+" /"+name, files[name], "linux", arch)
		}
		if n := bytes.Count(files[caBundle], []byte("-----BEGIN CERTIFICATE-----")); n < 100 || !x509.NewCertPool().AppendCertsFromPEM(files[caBundle]) {
			t.Errorf("%s: /%s holds %d certificates, want Debian's ca-certificates", arch, caBundle, n)
		}
		if !bytes.Contains(files["etc/services"], []byte("https\t\t443/tcp")) {
			t.Errorf("%s: /etc/services is not netbase's", arch)
		}
		for _, p := range []string{"ca-certificates", "netbase"} {
			if !bytes.HasPrefix(files["var/lib/dpkg/status.d/"+p], []byte("Package: "+p+"\n")) {
				t.Errorf("%s: no record of the package %s for image scanners: %q", arch, p, files["var/lib/dpkg/status.d/"+p])
			}
		}
	}
}

func checkChart(t *testing.T, out, image string) {
	chart := filepath.Join(out, "pipeline-operator-"+version+".tgz")
	f, err := os.Open(chart)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	meta := struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}{}
	if err := yaml.Unmarshal(readTar(t, gz, "pipeline-operator/Chart.yaml")["pipeline-operator/Chart.yaml"], &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Version != version || meta.AppVersion != version {
		t.Errorf("Chart.yaml: version %s, appVersion %s, want %s", meta.Version, meta.AppVersion, version)
	}
	rendered, err := exec.Command(os.Getenv("HELM"), "template", "pipeline-operator", chart, "--namespace", "pipeline-operator-system").Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	checkManager(t, "the chart", rendered, image)
}

// krewManifest is what the test reads of a krew manifest.
type krewManifest struct {
	Spec struct {
		Version   string `json:"version"`
		Platforms []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

func checkPlugin(t *testing.T, out string) {
	data, err := os.ReadFile(filepath.Join(out, "kubectl-pipeline.krew.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest krewManifest
	if err := yaml.Unmarshal(data, &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.Spec.Version != "v"+version {
		t.Errorf("krew manifest of version %s", manifest.Spec.Version)
	}
	seen := map[string]bool{}
	for _, p := range manifest.Spec.Platforms {
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		archive := fmt.Sprintf("kubectl-pipeline_%s_%s.tar.gz", goos, arch)
		seen[goos+"/"+arch] = true
		if !strings.HasSuffix(p.URI, "/v"+version+"/"+archive) {
			t.Errorf("%s/%s: uri %s", goos, arch, p.URI)
		}
		if sum := sha256File(t, filepath.Join(out, archive)); p.SHA256 != sum {
			t.Errorf("%s: sha256 %s in the manifest, %s of the archive", archive, p.SHA256, sum)
		}
		f, err := os.Open(filepath.Join(out, archive))
		if err != nil {
			t.Fatal(err)
		}
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		files := readTar(t, gz, p.Bin, "LICENSE")
		_ = f.Close()
		if len(files["LICENSE"]) == 0 {
			t.Errorf("%s holds no LICENSE", archive)
		}
		checkBinary(t, archive, files[p.Bin], goos, arch)
	}
	for _, want := range []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"} {
		if !seen[want] {
			t.Errorf("no archive for %s in the krew manifest", want)
		}
	}
}

func checkSums(t *testing.T, out string) {
	f, err := os.Open(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	listed := map[string]bool{}
	for s := bufio.NewScanner(f); s.Scan(); {
		sum, name, ok := strings.Cut(s.Text(), "  ")
		if !ok || sum != sha256File(t, filepath.Join(out, name)) {
			t.Errorf("SHA256SUMS line %q does not match the file", s.Text())
		}
		listed[name] = true
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "SHA256SUMS" && !listed[e.Name()] {
			t.Errorf("%s is not in SHA256SUMS", e.Name())
		}
	}
}

// checkHostManager runs binary, the image's linux/amd64 manager, where this test runs on amd64.
func checkHostManager(t *testing.T, binary []byte) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("not a linux/amd64 machine")
	}
	manager := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(manager, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(manager, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(got), version) {
		t.Errorf("manager --version: %v: %s", err, got)
	}
}

// checkManager finds the manager's Deployment in the manifests data and checks that it and the
// routers it makes run image.
func checkManager(t *testing.T, what string, data []byte, image string) {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s: no manager Deployment", what)
		}
		if err != nil {
			t.Fatal(err)
		}
		var d appsv1.Deployment
		if err := yaml.Unmarshal(doc, &d); err != nil || d.Kind != "Deployment" || d.Name != "pipeline-operator-controller-manager" {
			continue
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.Image != image {
			t.Errorf("%s: the manager runs %s, want %s", what, c.Image, image)
		}
		for _, e := range c.Env {
			if e.Name == "RELATED_IMAGE_ROUTER" && e.Value != image {
				t.Errorf("%s: the routers run %s, want %s", what, e.Value, image)
			}
		}
		return
	}
}

// checkBinary checks that data is an executable of goos/arch that carries the release's version.
func checkBinary(t *testing.T, what string, data []byte, goos, arch string) {
	t.Helper()
	checkArch(t, what, data, goos, arch)
	if !bytes.Contains(data, []byte(version)) {
		t.Errorf("%s: the binary does not carry the version %s", what, version)
	}
}

// checkArch checks that data is an executable of goos/arch.
func checkArch(t *testing.T, what string, data []byte, goos, arch string) {
	t.Helper()
	if len(data) == 0 {
		t.Errorf("%s: no binary", what)
		return
	}
	var got string
	r := bytes.NewReader(data)
	switch goos {
	case "linux":
		f, err := elf.NewFile(r)
		if err != nil {
			t.Errorf("%s: not ELF: %v", what, err)
			return
		}
		got = map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[f.Machine]
	case "darwin":
		f, err := macho.NewFile(r)
		if err != nil {
			t.Errorf("%s: not Mach-O: %v", what, err)
			return
		}
		got = map[macho.Cpu]string{macho.CpuAmd64: "amd64", macho.CpuArm64: "arm64"}[f.Cpu]
	case "windows":
		f, err := pe.NewFile(r)
		if err != nil {
			t.Errorf("%s: not PE: %v", what, err)
			return
		}
		got = map[uint16]string{pe.IMAGE_FILE_MACHINE_AMD64: "amd64", pe.IMAGE_FILE_MACHINE_ARM64: "arm64"}[f.Machine]
	}
	if got != arch {
		t.Errorf("%s: a binary for %q, want %s/%s", what, got, goos, arch)
	}
}

// readTar returns the files named (by their path in the archive, without a leading "./" or "/")
// of the tar r.
func readTar(t *testing.T, r io.Reader, names ...string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
		for _, n := range names {
			if name == n {
				data, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				out[n] = data
			}
		}
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// layoutOf is the index of the image layout archive of the release (its file in out) and its
// configuration per architecture, after checking that the layout names it tag and that its
// digest is the one the release's digest file says.
func layoutOf(t *testing.T, out, archive, digestFile, tag string) (v1.ImageIndex, map[string]*v1.ConfigFile) {
	t.Helper()
	index, desc := testenv.ReadLayout(t, filepath.Join(out, archive))
	digest, err := os.ReadFile(filepath.Join(out, digestFile))
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != strings.TrimSpace(string(digest)) {
		t.Errorf("%s: the index is %s, %s says %s", archive, desc.Digest, digestFile, digest)
	}
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != tag {
		t.Errorf("%s: the index is named %q, want %s", archive, got, tag)
	}
	m, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]*v1.ConfigFile{}
	for _, d := range m.Manifests {
		img, err := index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if configs[d.Platform.Architecture], err = img.ConfigFile(); err != nil {
			t.Fatal(err)
		}
	}
	if len(configs) != 2 || configs["amd64"] == nil || configs["arm64"] == nil {
		t.Errorf("%s: platforms %v, want linux/amd64 and linux/arm64", archive, slices.Collect(maps.Keys(configs)))
	}
	return index, configs
}

// relatedImage is an image the CSV lists for mirroring.
type relatedImage struct {
	Image string `json:"image"`
}

func checkBundle(t *testing.T, out, image string) {
	const csvFile = "manifests/pipeline-operator.clusterserviceversion.yaml"
	index, configs := layoutOf(t, out, "pipeline-operator-bundle-image.tar", "bundle-image-digest", repo+"-bundle:v"+version)
	for arch, bundle := range extractEach(t, index) {
		testenv.CheckLikeDockerfile(t, arch, testenv.ReadDockerfile(t, "../../bundle.Dockerfile"), configs[arch], bundle.Has)
		data, err := os.ReadFile(filepath.Join(bundle.Dir, csvFile))
		if err != nil {
			t.Fatal(err)
		}
		var csv struct {
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec struct {
				Version string `json:"version"`
				Install struct {
					Spec struct {
						Deployments []struct {
							Name string                `json:"name"`
							Spec appsv1.DeploymentSpec `json:"spec"`
						} `json:"deployments"`
					} `json:"spec"`
				} `json:"install"`
				RelatedImages []relatedImage `json:"relatedImages"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &csv); err != nil {
			t.Fatalf("%s: %s: %v", arch, csvFile, err)
		}
		if csv.Spec.Version != version || csv.Metadata.Name != "pipeline-operator.v"+version {
			t.Errorf("%s: the CSV is %s of version %s, want pipeline-operator.v%s", arch, csv.Metadata.Name, csv.Spec.Version, version)
		}
		if got := csv.Metadata.Annotations["containerImage"]; got != image {
			t.Errorf("%s: containerImage %s, want %s", arch, got, image)
		}
		if !slices.Contains(csv.Spec.RelatedImages, relatedImage{Image: image}) {
			t.Errorf("%s: relatedImages %v lack %s", arch, csv.Spec.RelatedImages, image)
		}
		if len(csv.Spec.Install.Spec.Deployments) == 0 {
			t.Errorf("%s: the CSV installs no Deployment", arch)
		}
		for _, d := range csv.Spec.Install.Spec.Deployments {
			deployment := appsv1.Deployment{Spec: d.Spec}
			deployment.Kind, deployment.Name = "Deployment", d.Name
			data, err := yaml.Marshal(deployment)
			if err != nil {
				t.Fatal(err)
			}
			checkManager(t, arch+" CSV", data, image)
		}
	}
}

func checkCatalog(t *testing.T, out string) {
	bundleDigest, err := os.ReadFile(filepath.Join(out, "bundle-image-digest"))
	if err != nil {
		t.Fatal(err)
	}
	bundleImage := repo + "-bundle@" + strings.TrimSpace(string(bundleDigest))
	index, configs := layoutOf(t, out, "pipeline-operator-catalog-image.tar", "catalog-image-digest", repo+"-catalog:v"+version)
	for arch, catalog := range extractEach(t, index) {
		dir, owners := catalog.Dir, catalog.Owners
		testenv.CheckLikeDockerfile(t, arch, testenv.ReadDockerfile(t, "../../catalog.Dockerfile"), configs[arch], catalog.Has)
		for _, bin := range []string{"bin/opm", "bin/grpc_health_probe"} {
			data, err := os.ReadFile(filepath.Join(dir, bin))
			if err != nil {
				t.Fatal(err)
			}
			checkArch(t, arch+" /"+bin, data, "linux", arch)
		}
		if owners["tmp/cache"] != 65532 {
			t.Errorf("%s: /tmp/cache is owned by %d, not by the user who serves (opm locks it)", arch, owners["tmp/cache"])
		}
		entry, err := os.ReadFile(filepath.Join(dir, "configs/pipeline-operator/bundle-v"+version+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var bundle struct {
			Schema string `json:"schema"`
			Image  string `json:"image"`
		}
		if err := yaml.Unmarshal(entry, &bundle); err != nil || bundle.Schema != "olm.bundle" || bundle.Image != bundleImage {
			t.Errorf("%s: the catalog's bundle is %+v (%v), want the olm.bundle of image %s", arch, bundle, err, bundleImage)
		}
		channel, err := os.ReadFile(filepath.Join(dir, "configs/pipeline-operator/index.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var entries []string
		for line := range strings.Lines(string(channel)) {
			if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- name: "); ok {
				entries = append(entries, name)
			}
		}
		if len(entries) == 0 || entries[len(entries)-1] != "pipeline-operator.v"+version {
			t.Errorf("%s: the channel's head is not pipeline-operator.v%s: %v", arch, version, entries)
		}
		if arch == runtime.GOARCH {
			// The cache built at release is the one opm serves these configs with.
			cmd := exec.Command(os.Getenv("OPM"), "serve", filepath.Join(dir, "configs"), "--cache-dir", filepath.Join(dir, "tmp/cache"),
				"--cache-only", "--cache-enforce-integrity")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: opm serve finds the image's cache stale: %v\n%s", arch, err, b)
			}
		}
	}
}

// extractEach writes each platform's image of index to a directory of its own, by architecture.
func extractEach(t *testing.T, index v1.ImageIndex) map[string]testenv.ExtractedImage {
	t.Helper()
	m, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]testenv.ExtractedImage{}
	for _, d := range m.Manifests {
		img, err := index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Platform.Architecture] = testenv.Extract(t, img)
	}
	return out
}
