package realnodes

import (
	"archive/tar"
	"bufio"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
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

// The manager image made here (hack/ociimage) runs as the same user, with the same entrypoint
// and working directory, and holds the same files as the Dockerfile's image.
func TestManagerImageMatchesDockerfile(t *testing.T) {
	want := readDockerfile(t, filepath.Join("..", "..", "Dockerfile"))
	if want.user == "" || len(want.entrypoint) == 0 || len(want.files) == 0 {
		t.Fatalf("read no user, entrypoint or files from the Dockerfile: %+v", want)
	}
	img, err := tarball.ImageFromPath(os.Getenv("REALNODES_MANAGER_ARCHIVE"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != want.user || !slices.Equal(cfg.Config.Entrypoint, want.entrypoint) || cfg.Config.WorkingDir != want.workdir {
		t.Errorf("image: user %q, entrypoint %q, workdir %q; Dockerfile: user %q, entrypoint %q, workdir %q",
			cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.WorkingDir, want.user, want.entrypoint, want.workdir)
	}
	files := map[string]int64{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimPrefix(h.Name, "/")] = h.Mode
	}
	for _, f := range want.files {
		if mode, ok := files[f]; !ok || mode&0o111 == 0 {
			t.Errorf("the image has no executable %s (the Dockerfile copies it)", f)
		}
	}
}
