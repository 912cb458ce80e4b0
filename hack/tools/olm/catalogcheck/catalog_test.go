// Package catalogcheck_test serves the file-based catalog with opm and queries it over opm's gRPC
// registry API, the way OLM's catalog operator reads a CatalogSource.
//
// Run by `make test-bundle` with OPM (the opm binary), CATALOG_DIR, BUNDLE_DIR, PACKAGE, CHANNEL
// and BUNDLE_IMAGE_BASE set.
package catalogcheck_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/operator-registry/pkg/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthv1 "google.golang.org/grpc/health/grpc_health_v1"
	"sigs.k8s.io/yaml"
)

// csv is the part of a ClusterServiceVersion the test compares.
type csv struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec map[string]any `json:"spec"`
}

func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run this test through make test-bundle", name)
	}
	return v
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// serve starts opm serve on the catalog and returns a client once the registry is serving.
func serve(t *testing.T, opm, catalog string) api.RegistryClient {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(opm, "serve", catalog, "--port", strconv.Itoa(port),
		"--pprof-addr", "127.0.0.1:"+strconv.Itoa(freePort(t)),
		"--termination-log", filepath.Join(t.TempDir(), "termination-log"))
	logPath := filepath.Join(t.TempDir(), "opm.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("create the opm log: %v", err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start opm serve: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
	})

	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("connect to opm serve: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	health := healthv1.NewHealthClient(conn)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		res, err := health.Check(ctx, &healthv1.HealthCheckRequest{Service: "Registry"})
		cancel()
		if err == nil && res.Status == healthv1.HealthCheckResponse_SERVING {
			return api.NewRegistryClient(conn)
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(logPath)
			t.Fatalf("opm serve %s is not serving after 60s (last error: %v); its log:\n%s", catalog, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func readCSV(t *testing.T, bundle string) csv {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(bundle, "manifests", "*.clusterserviceversion.yaml"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("want one ClusterServiceVersion in %s/manifests, found %v (%v)", bundle, paths, err)
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatalf("read %s: %v", paths[0], err)
	}
	var c csv
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("decode %s: %v", paths[0], err)
	}
	return c
}

func listBundles(t *testing.T, c api.RegistryClient, pkg, channel string) []*api.Bundle {
	t.Helper()
	stream, err := c.ListBundles(context.Background(), &api.ListBundlesRequest{})
	if err != nil {
		t.Fatalf("list bundles: %v", err)
	}
	var bundles []*api.Bundle
	for {
		b, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("list bundles: %v", err)
		}
		if b.PackageName == pkg && b.ChannelName == channel {
			bundles = append(bundles, b)
		}
	}
	sort.Slice(bundles, func(i, j int) bool {
		return semver.MustParse(bundles[i].Version).LT(semver.MustParse(bundles[j].Version))
	})
	return bundles
}

func TestCatalogServesTheBundle(t *testing.T) {
	opm, catalog, bundleDir := env(t, "OPM"), env(t, "CATALOG_DIR"), env(t, "BUNDLE_DIR")
	pkgName, channel, imageBase := env(t, "PACKAGE"), env(t, "CHANNEL"), env(t, "BUNDLE_IMAGE_BASE")
	want := readCSV(t, bundleDir)
	if _, ok := want.Spec["version"].(string); !ok {
		t.Fatalf("the bundle's ClusterServiceVersion has no spec.version")
	}

	c := serve(t, opm, catalog)
	ctx := context.Background()

	pkg, err := c.GetPackage(ctx, &api.GetPackageRequest{Name: pkgName})
	if err != nil {
		t.Fatalf("get package %s: %v", pkgName, err)
	}
	if pkg.DefaultChannelName != channel {
		t.Errorf("default channel: got %q, want %q", pkg.DefaultChannelName, channel)
	}
	var head string
	for _, ch := range pkg.Channels {
		if ch.Name == channel {
			head = ch.CsvName
		}
	}
	if head != want.Metadata.Name {
		t.Errorf("head of channel %s: got %q, want the bundle's %q", channel, head, want.Metadata.Name)
	}

	checkHead(t, c, pkgName, channel, head, imageBase, want)
	checkUpgradeEdges(t, listBundles(t, c, pkgName, channel), want.Metadata.Name)
}

// checkHead checks that the head of the channel is exactly the bundle of bundle/: its
// ClusterServiceVersion, its image and its API.
func checkHead(t *testing.T, c api.RegistryClient, pkgName, channel, head, imageBase string, want csv) {
	t.Helper()
	wantVersion, _ := want.Spec["version"].(string)
	b, err := c.GetBundle(context.Background(), &api.GetBundleRequest{PkgName: pkgName, ChannelName: channel, CsvName: head})
	if err != nil {
		t.Fatalf("get the head bundle of %s/%s: %v", pkgName, channel, err)
	}
	if b.CsvName != want.Metadata.Name || b.Version != wantVersion {
		t.Errorf("head bundle: got %s %s, want %s %s", b.CsvName, b.Version, want.Metadata.Name, wantVersion)
	}
	if wantImage := imageBase + ":v" + wantVersion; b.BundlePath != wantImage {
		t.Errorf("head bundle image: got %q, want %q", b.BundlePath, wantImage)
	}
	var served csv
	if err := json.Unmarshal([]byte(b.CsvJson), &served); err != nil {
		t.Fatalf("decode the served ClusterServiceVersion: %v", err)
	}
	if !reflect.DeepEqual(served.Spec, want.Spec) {
		t.Errorf("the served ClusterServiceVersion's spec differs from the bundle's: run make catalog")
	}
	provides := false
	for _, gvk := range b.ProvidedApis {
		if gvk.Group == "distri-infer.ndsl.cn" && gvk.Version == "v1beta1" && gvk.Kind == "Pipeline" {
			provides = true
		}
	}
	if !provides {
		t.Errorf("head bundle provides %v, want distri-infer.ndsl.cn/v1beta1 Pipeline", b.ProvidedApis)
	}
}

// checkUpgradeEdges checks that every bundle, in version order, replaces the one before it
// and has a skipRange covering every earlier version, so OLM offers the head to an install
// of any earlier version — also to 0.0.1, older than every bundle of the catalog.
func checkUpgradeEdges(t *testing.T, bundles []*api.Bundle, head string) {
	t.Helper()
	if len(bundles) == 0 || bundles[len(bundles)-1].CsvName != head {
		t.Fatalf("the newest bundle of the channel is not %s: %d bundles", head, len(bundles))
	}
	earlier := []string{"0.0.1"}
	for i, bundle := range bundles {
		if i > 0 && bundle.Replaces != bundles[i-1].CsvName {
			t.Errorf("%s replaces %q, want %q", bundle.CsvName, bundle.Replaces, bundles[i-1].CsvName)
		}
		inRange, err := semver.ParseRange(bundle.SkipRange)
		if err != nil {
			t.Fatalf("%s: skipRange %q: %v", bundle.CsvName, bundle.SkipRange, err)
		}
		for _, v := range earlier {
			if !inRange(semver.MustParse(v)) {
				t.Errorf("%s: skipRange %q does not cover the earlier version %s", bundle.CsvName, bundle.SkipRange, v)
			}
		}
		if inRange(semver.MustParse(bundle.Version)) {
			t.Errorf("%s: skipRange %q covers its own version", bundle.CsvName, bundle.SkipRange)
		}
		earlier = append(earlier, bundle.Version)
	}
}
