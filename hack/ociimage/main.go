// Command ociimage makes a container image of static binaries and files without a container
// engine or a registry. The image has one layer on an empty base: the files named, an
// /etc/passwd and /etc/group naming the user, and a /tmp (with -user "", the files alone: a
// bundle image, which nothing runs).
//
//	ociimage -o ARCHIVE -tag REF [-entrypoint /bin] [-cmd ARG]... [-user UID:GID] [-workdir DIR]
//	         [-label KEY=VALUE]... [-owned PATH-IN-IMAGE]... [-arch amd64[,arm64...]]
//	         [-digest-file FILE] FILE=PATH-IN-IMAGE...
//
// For one architecture it writes an image archive that `ctr images import` and `docker load`
// read. For several it writes one multi-platform image: an OCI image layout, as a tar, whose
// index names the image REF and holds an image per architecture, made of the FILEs with
// {arch} replaced by the architecture (`bin/{arch}/manager=/manager`); `ctr images import`
// reads it and unpacks the machine's platform. -digest-file receives the digest a registry
// serves the image by once pushed: the image's manifest, or the multi-platform index.
//
// A FILE that is a directory is copied with everything under it. Files are owned by root
// (those under an -owned path by the user), readable by all; those executable on disk are
// executable in the image. Times are zero, so the
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
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
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
	arch := fs.String("arch", "amd64", "The architectures of the image, comma-separated; {arch} in a FILE is replaced by each.")
	digestFile := fs.String("digest-file", "", "A file to write the image's digest (sha256:…) to: its manifest's, or its index's.")
	var cmd, labels, owned repeated
	fs.Var(&cmd, "cmd", "An argument of the image's command (repeat it for each).")
	fs.Var(&labels, "label", "A label of the image, KEY=VALUE (repeat it for each).")
	fs.Var(&owned, "owned", "A path in the image that the user owns, with everything under it (repeat it for each).")
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
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	archs := strings.Split(*arch, ",")
	spec := imageSpec{user: *user, workdir: *workdir, entrypoint: *entrypoint, cmd: cmd, owned: owned,
		labels: map[string]string{}, oci: len(archs) > 1}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return fmt.Errorf("-label %q is not KEY=VALUE", l)
		}
		spec.labels[k] = v
	}
	var images []v1.Image
	for _, a := range archs {
		files := make([]string, len(fs.Args()))
		for i, f := range fs.Args() {
			files[i] = strings.ReplaceAll(f, "{arch}", a)
		}
		img, err := spec.build(a, files)
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		images = append(images, img)
	}
	if len(images) == 1 {
		if err := tarball.WriteToFile(*out, ref, images[0]); err != nil {
			return err
		}
		digest, err := images[0].Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s (%s) written to %s\n", ref, digest, *out)
		return writeDigest(*digestFile, digest)
	}
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, img := range images {
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: archs[i]}}})
	}
	if err := writeLayout(*out, ref, index); err != nil {
		return err
	}
	digest, err := index.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s (index %s, %s) written to %s\n", ref, digest, strings.Join(archs, ", "), *out)
	return writeDigest(*digestFile, digest)
}

// writeDigest writes digest to file, unless file is empty.
func writeDigest(file string, digest v1.Hash) error {
	if file == "" {
		return nil
	}
	return os.WriteFile(file, []byte(digest.String()+"\n"), 0o644)
}

// repeated is a flag given once per value.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// imageSpec is what every architecture's image shares.
type imageSpec struct {
	user, workdir, entrypoint string
	cmd, owned                []string
	labels                    map[string]string
	// oci: OCI media types (an image of a multi-platform index), else Docker's.
	oci bool
}

// build makes the image of files for arch.
func (s imageSpec) build(arch string, files []string) (v1.Image, error) {
	layer, err := buildLayer(files, s.user, s.owned, s.oci)
	if err != nil {
		return nil, err
	}
	base := empty.Image
	if s.oci {
		base = mutate.ConfigMediaType(mutate.MediaType(base, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Config.User, cfg.Config.WorkingDir = s.user, s.workdir
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if s.entrypoint != "" {
		cfg.Config.Entrypoint = []string{s.entrypoint}
	}
	cfg.Config.Cmd = s.cmd
	if len(s.labels) > 0 {
		cfg.Config.Labels = s.labels
	}
	return mutate.ConfigFile(img, cfg)
}

// writeLayout writes index as an OCI image layout named ref, in a tar at out.
func writeLayout(out string, ref name.Tag, index v1.ImageIndex) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".layout-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.Name(), "io.containerd.image.name": ref.Name(),
	})); err != nil {
		return err
	}
	return tarDir(dir, out)
}

// tarDir writes the files under dir to a tar at out, in order, with zero times.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	return errors.Join(err, f.Close())
}

// entry is one file or directory of the layer.
type entry struct {
	dir  bool
	mode int64
	data []byte
}

// buildLayer makes the layer of the files named by FILE=PATH arguments, with the user's
// /etc/passwd and /etc/group and a /tmp unless user is empty; the owned paths and what is under
// them belong to the user.
func buildLayer(files []string, user string, owned []string, oci bool) (v1.Layer, error) {
	entries := map[string]entry{}
	var uid, gid int
	if user != "" {
		if _, err := fmt.Sscanf(user, "%d:%d", &uid, &gid); err != nil || fmt.Sprintf("%d:%d", uid, gid) != user {
			return nil, fmt.Errorf("-user %q is not UID:GID", user)
		}
		entries["etc/passwd"] = entry{mode: 0o644, data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, gid)}
		entries["etc/group"] = entry{mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", gid)}
		entries["tmp"] = entry{dir: true, mode: 0o1777}
	} else if len(owned) > 0 {
		return nil, errors.New("-owned needs a -user to own the paths")
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
		if under(p, owned) {
			h.Uid, h.Gid = uid, gid
		}
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
	var opts []tarball.LayerOption
	if oci {
		opts = append(opts, tarball.WithMediaType(types.OCILayer))
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, opts...)
}

// under reports whether the path p of the image is one of paths, or under one.
func under(p string, paths []string) bool {
	for _, o := range paths {
		o = strings.TrimPrefix(path.Clean(o), "/")
		if p == o || strings.HasPrefix(p, o+"/") {
			return true
		}
	}
	return false
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
