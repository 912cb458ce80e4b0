package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// files are the modes of the files of img, by path.
func files(t *testing.T, img v1.Image) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		got[strings.TrimSuffix(h.Name, "/")] = h.Mode
	}
}

// An image made twice of the same files is the same image, and holds the files with their
// modes, the user's passwd entry and a /tmp, with the entrypoint and user asked for.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bin, data := filepath.Join(dir, "prog"), filepath.Join(dir, "data")
	if err := os.WriteFile(bin, []byte("#!program"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(data, "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "m", "model.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	var digests []string
	for i := range 2 {
		out := filepath.Join(dir, "image"+string(rune('0'+i))+".tar")
		if err := run([]string{"-o", out, "-tag", "localhost/x:1", "-entrypoint", "/prog", "-user", "1000:1001", bin + "=/prog", data + "=/models"}); err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(out, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != "1000:1001" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/prog" || cfg.Architecture != "amd64" {
			t.Errorf("config: user %q entrypoint %q arch %q", cfg.Config.User, cfg.Config.Entrypoint, cfg.Architecture)
		}
		got := files(t, img)
		for name, mode := range map[string]int64{"prog": 0o755, "models/m/model.json": 0o644, "models/m": 0o755, "etc/passwd": 0o644, "tmp": 0o1777} {
			if m, ok := got[name]; !ok || m != mode {
				t.Errorf("%s: mode %o (present %v), want %o", name, m, ok, mode)
			}
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("the same inputs made two images: %v", digests)
	}
	if err := run([]string{"-o", filepath.Join(dir, "x.tar"), "-tag", "localhost/x:1", bin + "=relative"}); err == nil {
		t.Error("a relative path in the image was accepted")
	}
}

// An image with a command, labels and a path the user owns has them in its config and layer;
// one without a user (a bundle image) holds the files alone.
func TestImageConfigAndOwners(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "index"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "served.tar")
	if err := run([]string{"-o", out, "-tag", "localhost/x:1", "-entrypoint", "/bin/opm", "-cmd", "serve", "-cmd", "/configs",
		"-label", "a.b/c=/configs", "-owned", "/tmp/cache", cache + "=/tmp/cache", cache + "=/configs"}); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Config.Cmd, " ") != "serve /configs" || cfg.Config.Labels["a.b/c"] != "/configs" {
		t.Errorf("config: cmd %q labels %v", cfg.Config.Cmd, cfg.Config.Labels)
	}
	owners := map[string]int{}
	tr := tar.NewReader(mutate.Extract(img))
	for h, err := tr.Next(); err != io.EOF; h, err = tr.Next() {
		if err != nil {
			t.Fatal(err)
		}
		owners[strings.TrimSuffix(h.Name, "/")] = h.Uid
	}
	for p, uid := range map[string]int{"tmp/cache": 65532, "tmp/cache/index": 65532, "configs/index": 0, "tmp": 0} {
		if owners[p] != uid {
			t.Errorf("%s owned by %d, want %d", p, owners[p], uid)
		}
	}

	bare := filepath.Join(dir, "bundle.tar")
	if err := run([]string{"-o", bare, "-tag", "localhost/x:1", "-user", "", cache + "=/manifests"}); err != nil {
		t.Fatal(err)
	}
	if img, err = tarball.ImageFromPath(bare, nil); err != nil {
		t.Fatal(err)
	}
	if got := files(t, img); len(got) != 2 {
		t.Errorf("an image without a user holds %v, want /manifests alone", got)
	}
	if err := run([]string{"-o", bare, "-tag", "localhost/x:1", "-user", "", "-owned", "/x", cache + "=/x"}); err == nil {
		t.Error("-owned without a user was accepted")
	}
}
