package realnodes

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ndsl-cn/pipeline-operator/internal/testenv"
)

// The manager image made here (hack/ociimage) is one image for amd64 and arm64, each running as
// the same user, with the same entrypoint and working directory, and holding the same files as
// the Dockerfile's image, its binaries built for its architecture.
func TestManagerImageMatchesDockerfile(t *testing.T) {
	want := testenv.ReadDockerfile(t, filepath.Join("..", "..", "Dockerfile"))
	if want.User == "" || len(want.Entrypoint) == 0 || len(want.Files) == 0 {
		t.Fatalf("read no user, entrypoint or files from the Dockerfile: %+v", want)
	}
	index, _ := testenv.ReadLayout(t, os.Getenv("REALNODES_MANAGER_ARCHIVE"))
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
		if cfg.Architecture != arch {
			t.Errorf("the %s image's configuration is of %s", arch, cfg.Architecture)
		}
		files := testenv.Extract(t, img)
		testenv.CheckLikeDockerfile(t, arch+" image", want, cfg, files.Has)
		for _, f := range want.Files {
			data, err := os.ReadFile(filepath.Join(files.Dir, f))
			if err != nil {
				continue // reported above
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
