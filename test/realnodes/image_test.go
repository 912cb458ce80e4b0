package realnodes

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// dockerfileImage is what the final stage of a Dockerfile makes: its user, entrypoint, working
// directory and the files it copies in.
type dockerfileImage struct {
	user, workdir string
	entrypoint    []string
	files         []string
}

func readDockerfile(t *testing.T, path string) dockerfileImage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var img dockerfileImage
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			img = dockerfileImage{} // only the final stage ships
		case "USER":
			img.user = fields[1]
		case "WORKDIR":
			img.workdir = fields[1]
		case "ENTRYPOINT":
			for _, e := range strings.Split(strings.Trim(strings.Join(fields[1:], " "), "[]"), ",") {
				img.entrypoint = append(img.entrypoint, strings.Trim(strings.TrimSpace(e), `"`))
			}
		case "COPY":
			args := fields[1:]
			for len(args) > 0 && strings.HasPrefix(args[0], "--") {
				args = args[1:]
			}
			dst := args[len(args)-1]
			if !filepath.IsAbs(dst) {
				dst = filepath.Join("/", img.workdir, dst)
			}
			for _, src := range args[:len(args)-1] {
				img.files = append(img.files, filepath.Join(dst, filepath.Base(src)))
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return img
}

// The manager image made here (hack/ociimage) is one image for amd64 and arm64, each running as
// the same user, with the same entrypoint and working directory, and holding the same files as
// the Dockerfile's image, its binaries built for its architecture.
func TestManagerImageMatchesDockerfile(t *testing.T) {
	want := readDockerfile(t, filepath.Join("..", "..", "Dockerfile"))
	if want.user == "" || len(want.entrypoint) == 0 || len(want.files) == 0 {
		t.Fatalf("read no user, entrypoint or files from the Dockerfile: %+v", want)
	}
	index := readLayout(t, os.Getenv("REALNODES_MANAGER_ARCHIVE"))
	manifest, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var archs []string
	for _, desc := range manifest.Manifests {
		if desc.Platform == nil {
			t.Fatalf("manifest %s names no platform", desc.Digest)
		}
		arch := desc.Platform.Architecture
		archs = append(archs, arch)
		img, err := index.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != arch || cfg.Config.User != want.user || !slices.Equal(cfg.Config.Entrypoint, want.entrypoint) ||
			cfg.Config.WorkingDir != want.workdir {
			t.Errorf("%s image: arch %q, user %q, entrypoint %q, workdir %q; Dockerfile: user %q, entrypoint %q, workdir %q", arch,
				cfg.Architecture, cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.WorkingDir, want.user, want.entrypoint, want.workdir)
		}
		files := imageFiles(t, img)
		for _, f := range want.files {
			data, ok := files[f]
			if !ok {
				t.Errorf("the %s image has no %s (the Dockerfile copies it)", arch, f)
				continue
			}
			bin, err := elf.NewFile(bytes.NewReader(data))
			if err != nil {
				t.Errorf("%s of the %s image is not a program: %v", f, arch, err)
				continue
			}
			if bin.Machine != machines[arch] {
				t.Errorf("%s of the %s image is built for %s", f, arch, bin.Machine)
			}
		}
	}
	slices.Sort(archs)
	if !slices.Equal(archs, []string{"amd64", "arm64"}) {
		t.Errorf("the image's platforms are %v, want amd64 and arm64", archs)
	}
}

// readLayout reads the image index of an OCI image layout in a tar, as hack/ociimage writes it.
func readLayout(t *testing.T, archive string) v1.ImageIndex {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 {
		t.Fatalf("the layout names %d images, want the one multi-platform image", len(manifest.Manifests))
	}
	index, err := root.ImageIndex(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return index
}

// imageFiles are the regular files of img, by absolute path.
func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files["/"+strings.TrimPrefix(h.Name, "/")] = data
		}
	}
}
