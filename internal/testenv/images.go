package testenv

import (
	"archive/tar"
	"encoding/json"
	"errors"
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

// Dockerfile is what the last stage of a Dockerfile gives its image: the user, working directory
// (empty when the stage sets none), entrypoint, command and labels, and the paths it copies to.
type Dockerfile struct {
	User, Workdir   string
	Entrypoint, Cmd []string
	Labels          map[string]string
	// Files are the absolute paths the stage copies to: a COPY of one source names its
	// destination; of several, or into the working directory, each source by its name there.
	Files []string
}

// ReadDockerfile reads the last stage of the Dockerfile at path; the Dockerfiles of the
// repository write ENTRYPOINT and CMD in JSON form.
func ReadDockerfile(t testing.TB, path string) Dockerfile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d Dockerfile
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		args := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), fields[0]))
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			d = Dockerfile{Labels: map[string]string{}} // only the last stage ships
		case "WORKDIR":
			d.Workdir = args
		case "USER":
			d.User = args
		case "LABEL":
			k, v, _ := strings.Cut(args, "=")
			d.Labels[k] = v
		case "ENTRYPOINT", "CMD":
			var list []string
			if err := json.Unmarshal([]byte(args), &list); err != nil {
				t.Fatalf("%s: %s is not in JSON form: %v", path, fields[0], err)
			}
			if strings.EqualFold(fields[0], "CMD") {
				d.Cmd = list
			} else {
				d.Entrypoint = list
			}
		case "COPY":
			paths := slices.DeleteFunc(fields[1:], func(f string) bool { return strings.HasPrefix(f, "--") })
			srcs, dst := paths[:len(paths)-1], filepath.Join("/", d.Workdir, paths[len(paths)-1])
			if filepath.IsAbs(paths[len(paths)-1]) {
				dst = filepath.Clean(paths[len(paths)-1])
			}
			for _, src := range srcs {
				if len(srcs) > 1 || dst == filepath.Join("/", d.Workdir) {
					d.Files = append(d.Files, filepath.Join(dst, filepath.Base(src)))
				} else {
					d.Files = append(d.Files, dst)
				}
			}
		}
	}
	return d
}

// CheckLikeDockerfile checks that an image of configuration cfg gives what the Dockerfile d gives:
// its user, working directory (where d sets one), entrypoint, command and labels, and a file or
// directory at each path it copies to (has tells, for a path without its leading "/").
func CheckLikeDockerfile(t testing.TB, what string, d Dockerfile, cfg *v1.ConfigFile, has func(string) bool) {
	t.Helper()
	if cfg.Config.User != d.User || !slices.Equal(cfg.Config.Entrypoint, d.Entrypoint) || !slices.Equal(cfg.Config.Cmd, d.Cmd) ||
		d.Workdir != "" && cfg.Config.WorkingDir != d.Workdir {
		t.Errorf("%s: user %q, workdir %q, entrypoint %q, cmd %q; the Dockerfile gives %q, %q, %q, %q", what,
			cfg.Config.User, cfg.Config.WorkingDir, cfg.Config.Entrypoint, cfg.Config.Cmd, d.User, d.Workdir, d.Entrypoint, d.Cmd)
	}
	for k, v := range d.Labels {
		if cfg.Config.Labels[k] != v {
			t.Errorf("%s: label %s is %q; the Dockerfile gives %q", what, k, cfg.Config.Labels[k], v)
		}
	}
	for _, f := range d.Files {
		if !has(strings.TrimPrefix(f, "/")) {
			t.Errorf("%s: no %s, which the Dockerfile copies", what, f)
		}
	}
}

// ReadLayout reads the OCI image layout in the tar archive (as hack/ociimage writes a
// multi-platform image): its one index, and the layout's descriptor of it.
func ReadLayout(t testing.TB, archive string) (v1.ImageIndex, v1.Descriptor) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	Untar(t, f, dir)
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 {
		t.Fatalf("%s: the layout holds %d manifests, want the one index", archive, len(top.Manifests))
	}
	index, err := root.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return index, top.Manifests[0]
}

// ExtractedImage is an image's file system written to a directory, with the owner (uid) of each
// path, by its path without the leading "/".
type ExtractedImage struct {
	Dir    string
	Owners map[string]int
}

// Has reports whether the image holds the path p (without its leading "/").
func (e ExtractedImage) Has(p string) bool {
	_, err := os.Stat(filepath.Join(e.Dir, p))
	return err == nil
}

// Extract writes img's file system to a directory of the test's.
func Extract(t testing.TB, img v1.Image) ExtractedImage {
	t.Helper()
	e := ExtractedImage{Dir: t.TempDir()}
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	e.Owners = Untar(t, rc, e.Dir)
	return e
}

// Untar writes the directories and regular files of the tar r to dir, and returns the owner
// (uid) of each, by its path in r without a leading "/" or trailing "/".
func Untar(t testing.TB, r io.Reader, dir string) map[string]int {
	t.Helper()
	owners := map[string]int{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return owners
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.Trim(filepath.Clean("/"+h.Name), "/")
		owners[name] = h.Uid
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
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
}
