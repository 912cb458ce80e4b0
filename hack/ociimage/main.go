// Command ociimage makes a container image of static binaries and files without a container
// engine or a registry, and writes it as an image archive that `ctr images import` (and
// `docker load`) read. The image has one layer on an empty base: the files named, an /etc/passwd
// and /etc/group naming the user, and a /tmp.
//
//	ociimage -o ARCHIVE -tag REF [-entrypoint /bin] [-user UID:GID] [-workdir DIR]
//	         [-arch amd64] FILE=PATH-IN-IMAGE...
//
// A FILE that is a directory is copied with everything under it. Files are owned by root,
// readable by all; those executable on disk are executable in the image. Times are zero, so the
// same inputs make the same image, digest included.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("ociimage", flag.ContinueOnError)
	out := fs.String("o", "", "The image archive to write.")
	tag := fs.String("tag", "", "The image's name, as nodes will know it (repository:tag).")
	entrypoint := fs.String("entrypoint", "", "The image's entrypoint (one path; arguments come from the pod).")
	user := fs.String("user", "65532:65532", "The user the image runs as, UID:GID.")
	workdir := fs.String("workdir", "/", "The image's working directory.")
	arch := fs.String("arch", "amd64", "The architecture of the binaries.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *tag == "" || fs.NArg() == 0 {
		return errors.New("-o, -tag and at least one FILE=/PATH-IN-IMAGE are required (ociimage -h tells the flags)")
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return err
	}
	layer, err := buildLayer(fs.Args(), *user)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", *arch
	cfg.Config.User, cfg.Config.WorkingDir = *user, *workdir
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if *entrypoint != "" {
		cfg.Config.Entrypoint = []string{*entrypoint}
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	if err := tarball.WriteToFile(*out, ref, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s (%s) written to %s\n", ref, digest, *out)
	return nil
}

// entry is one file or directory of the layer.
type entry struct {
	dir  bool
	mode int64
	data []byte
}

// buildLayer makes the layer of the files named by FILE=PATH arguments, with the user's
// /etc/passwd and /etc/group and a /tmp.
func buildLayer(files []string, user string) (v1.Layer, error) {
	uid, gid, ok := strings.Cut(user, ":")
	if !ok {
		return nil, fmt.Errorf("-user %q is not UID:GID", user)
	}
	entries := map[string]entry{
		"etc/passwd": {mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/sbin/nologin\n", uid, gid)},
		"etc/group":  {mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%s:\n", gid)},
		"tmp":        {dir: true, mode: 0o1777},
	}
	for _, f := range files {
		src, dst, ok := strings.Cut(f, "=")
		if !ok || !path.IsAbs(dst) {
			return nil, fmt.Errorf("%q is not FILE=/PATH-IN-IMAGE", f)
		}
		if err := add(entries, src, strings.TrimPrefix(path.Clean(dst), "/")); err != nil {
			return nil, err
		}
	}
	// Every parent directory is in the layer too.
	for p := range entries {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = entry{dir: true, mode: 0o755}
			}
		}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := entries[p]
		h := &tar.Header{Name: p, Mode: e.mode, Typeflag: tar.TypeReg, Size: int64(len(e.data)), Format: tar.FormatPAX}
		if e.dir {
			h.Name, h.Typeflag, h.Size = p+"/", tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// add puts the file or the tree at src into entries at dst.
func add(entries map[string]entry, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := path.Join(dst, filepath.ToSlash(rel))
		if d.IsDir() {
			entries[target] = entry{dir: true, mode: 0o755}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		entries[target] = entry{mode: mode, data: data}
		return nil
	})
}
