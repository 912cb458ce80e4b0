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
	"github.com/google/go-containerregistry/pkg/v1/layout"
	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	version = "0.0.0-test.1"
	repo    = "example.com/pipeline-operator"
)

func TestRelease(t *testing.T) {
	kustomize, helm := os.Getenv("KUSTOMIZE"), os.Getenv("HELM")
	if kustomize == "" || helm == "" {
		t.Skip("KUSTOMIZE and HELM name the tools: run `make test-release`")
	}
	out := t.TempDir()
	cmd := exec.Command("../../hack/release.sh", version, repo, out, kustomize, helm)
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
	index, desc := imageIndex(t, out)
	platforms := imageFiles(t, index, "manager", "router")
	t.Run("the image: one index of the digest, linux/amd64 and linux/arm64, each binary of its architecture and version",
		func(t *testing.T) { checkImage(t, desc, platforms, digest) })
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
	t.Run("SHA256SUMS names every other file with its sum", func(t *testing.T) { checkSums(t, out) })
	t.Run("the host's manager says its version", func(t *testing.T) { checkHostManager(t, platforms["amd64"]["manager"]) })
}

// imageIndex is the multi-platform index of the release's image layout, and the layout's one
// descriptor of it.
func imageIndex(t *testing.T, out string) (v1.ImageIndex, v1.Descriptor) {
	t.Helper()
	dir := t.TempDir()
	untar(t, filepath.Join(out, "pipeline-operator-image.tar"), dir)
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 {
		t.Fatalf("the layout holds %d manifests, want the one index", len(top.Manifests))
	}
	index, err := root.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return index, top.Manifests[0]
}

// imageFiles are the files named of each platform's image of index, by architecture.
func imageFiles(t *testing.T, index v1.ImageIndex, names ...string) map[string]map[string][]byte {
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
		if d.Platform == nil || d.Platform.OS != "linux" || cfg.Architecture != d.Platform.Architecture || cfg.Config.User != "65532:65532" {
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

// checkImage checks the layout's descriptor of the index and the binaries of its platforms.
func checkImage(t *testing.T, desc v1.Descriptor, platforms map[string]map[string][]byte, digest string) {
	if desc.Digest.String() != digest {
		t.Errorf("the layout's index is %s, image-digest says %s", desc.Digest, digest)
	}
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != repo+":v"+version {
		t.Errorf("the index is named %q, want %s:v%s", got, repo, version)
	}
	if len(platforms) != 2 || platforms["amd64"] == nil || platforms["arm64"] == nil {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", slices.Collect(maps.Keys(platforms)))
	}
	for arch, files := range platforms {
		for _, name := range []string{"manager", "router"} {
			checkBinary(t, arch+" /"+name, files[name], "linux", arch)
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
	if !bytes.Contains(data, []byte(version)) {
		t.Errorf("%s: the binary does not carry the version %s", what, version)
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

// untar writes the files of the tar archive to dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			t.Fatalf("%s: entry %s leaves the directory", archive, h.Name)
		}
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
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
