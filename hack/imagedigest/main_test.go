package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// testRegistry serves go-containerregistry's in-memory registry on 127.0.0.1 for the test and
// returns its host:port.
func testRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatalf("parsing the registry's URL: %v", err)
	}
	return u.Host
}

// pushRandom pushes a random image to image (a reference on the test registry) and returns its
// digest.
func pushRandom(t *testing.T, image string) v1.Hash {
	t.Helper()
	ref, err := name.ParseReference(image)
	if err != nil {
		t.Fatalf("parsing %s: %v", image, err)
	}
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatalf("making a random image: %v", err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("pushing %s: %v", image, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatalf("digest of the random image: %v", err)
	}
	return d
}

// runCommand runs the command with args and returns what it printed and its error.
func runCommand(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestDigestOfTag(t *testing.T) {
	host := testRegistry(t)
	image := host + "/pipeline-operator:v1.2.3"
	want := pushRandom(t, image)
	// Another tag of the same repository, pushed later, changes nothing.
	pushRandom(t, host+"/pipeline-operator:latest")

	out, stderr, err := runCommand(t, image)
	if err != nil {
		t.Fatalf("imagedigest %s: %v (stderr %q)", image, err, stderr)
	}
	if got, wantOut := out, host+"/pipeline-operator@"+want.String()+"\n"; got != wantOut {
		t.Errorf("imagedigest %s printed %q, want %q", image, got, wantOut)
	}

	// The digest reference itself resolves to the same.
	out, _, err = runCommand(t, host+"/pipeline-operator@"+want.String())
	if err != nil || out != host+"/pipeline-operator@"+want.String()+"\n" {
		t.Errorf("imagedigest of the digest reference printed %q, %v", out, err)
	}
}

func TestDigestOfUnknownTagFails(t *testing.T) {
	host := testRegistry(t)
	pushRandom(t, host+"/pipeline-operator:v1.2.3")
	image := host + "/pipeline-operator:v9.9.9"

	out, _, err := runCommand(t, image)
	if err == nil {
		t.Fatalf("imagedigest %s succeeded with %q, want an error", image, out)
	}
	if out != "" {
		t.Errorf("imagedigest %s printed %q, want nothing", image, out)
	}
	if !strings.Contains(err.Error(), image) {
		t.Errorf("the error %q does not name the image %s", err, image)
	}
}

func TestDigestRefusesPlainHTTPOutsideLoopback(t *testing.T) {
	// go-containerregistry speaks plain HTTP to private and .local registries too; the
	// command's transport refuses such a request before anything is dialled.
	for _, host := range []string{"10.0.0.1", "192.168.20.235", "registry.local", "127.0.0.1.example.com"} {
		_, err := newResolver().transport.RoundTrip(httptest.NewRequest(http.MethodGet, "http://"+host+":5000/v2/", nil))
		if err == nil || !strings.Contains(err.Error(), "plain HTTP only on loopback") {
			t.Errorf("plain HTTP to %s: %v, want a refusal", host, err)
		}
	}
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]"} {
		if !isLoopback(strings.Trim(host, "[]")) {
			t.Errorf("%s is not taken for loopback", host)
		}
	}
}

func TestPinBaseImages(t *testing.T) {
	host := testRegistry(t)
	golang := pushRandom(t, host+"/library/golang:1.26")
	static := pushRandom(t, host+"/distroless/static:nonroot")
	oldStatic := pushRandom(t, host+"/distroless/static:old")

	dockerfile := "# syntax=docker/dockerfile:1\n" +
		"ARG BASE=" + host + "/library/golang:1.26\n" +
		"FROM " + host + "/library/golang:1.26 AS builder\n" +
		"RUN echo 'FROM " + host + "/library/golang:1.26'   \n" +
		"from --platform=$BUILDPLATFORM " + host + "/library/golang:1.26 as Tools\r\n" +
		"FROM ${BASE}\n" +
		"FROM tools AS again\n" +
		"FROM scratch\n" +
		"\tFROM " + host + "/distroless/static:nonroot@" + oldStatic.String() + "\n" +
		"COPY --from=builder /workspace/manager .\n" +
		"ENTRYPOINT [\"/manager\"]" // no newline at the end
	want := "# syntax=docker/dockerfile:1\n" +
		"ARG BASE=" + host + "/library/golang:1.26\n" +
		"FROM " + host + "/library/golang:1.26@" + golang.String() + " AS builder\n" +
		"RUN echo 'FROM " + host + "/library/golang:1.26'   \n" +
		"from --platform=$BUILDPLATFORM " + host + "/library/golang:1.26@" + golang.String() + " as Tools\r\n" +
		"FROM ${BASE}\n" +
		"FROM tools AS again\n" +
		"FROM scratch\n" +
		"\tFROM " + host + "/distroless/static:nonroot@" + static.String() + "\n" +
		"COPY --from=builder /workspace/manager .\n" +
		"ENTRYPOINT [\"/manager\"]"
	unchanged := "FROM scratch\nCOPY catalog /configs\n"

	dir := t.TempDir()
	path := filepath.Join(dir, "Dockerfile")
	other := filepath.Join(dir, "catalog.Dockerfile")
	writeFile(t, path, dockerfile, 0o640)
	writeFile(t, other, unchanged, 0o644)

	if _, stderr, err := runCommand(t, "-pin", path, other); err != nil {
		t.Fatalf("imagedigest -pin: %v (stderr %q)", err, stderr)
	}
	if got := readFile(t, path); got != want {
		t.Errorf("pinned Dockerfile:\n%s\nwant:\n%s", got, want)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o640 {
		t.Errorf("the pinned Dockerfile's mode: %v, %v; want 0640", info.Mode(), err)
	}
	if got := readFile(t, other); got != unchanged {
		t.Errorf("a Dockerfile without base images from a registry changed:\n%s", got)
	}

	// Pinning again changes nothing.
	if _, _, err := runCommand(t, "-pin", path); err != nil {
		t.Fatalf("imagedigest -pin again: %v", err)
	}
	if got := readFile(t, path); got != want {
		t.Errorf("pinning again changed the Dockerfile:\n%s", got)
	}
}

func TestPinUnknownBaseImageWritesNothing(t *testing.T) {
	host := testRegistry(t)
	pushRandom(t, host+"/library/golang:1.26")
	first := "FROM " + host + "/library/golang:1.26\n"
	second := "FROM " + host + "/library/golang:1.99\n"
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.Dockerfile"), first, 0o644)
	writeFile(t, filepath.Join(dir, "b.Dockerfile"), second, 0o644)

	_, _, err := runCommand(t, "-pin", filepath.Join(dir, "a.Dockerfile"), filepath.Join(dir, "b.Dockerfile"))
	if err == nil || !strings.Contains(err.Error(), host+"/library/golang:1.99") {
		t.Fatalf("pinning an unknown base image: %v, want an error naming it", err)
	}
	if got := readFile(t, filepath.Join(dir, "a.Dockerfile")); got != first {
		t.Errorf("a Dockerfile was written although another's base image is unknown:\n%s", got)
	}
}

// writeFile writes content to path with mode perm.
func writeFile(t *testing.T, path, content string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// readFile returns the content of path.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
