package olm

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/ndsl-cn/pipeline-operator/test/localpod"
)

// inlineCatalog copies the file-based catalog src to dst and renders each of its bundle files
// again with `opm render` from the bundle directory of that version (bundles: version → dir),
// without an image reference: the rendered bundle then carries its manifests inline, and OLM
// installs it without a bundle-unpack Job (which would need a pod that runs the bundle image).
// The committed catalog names the bundle image, as a registry-backed cluster needs; channels,
// upgrade edges and manifests are the same.
func inlineCatalog(src, dst string, bundles map[string]string) {
	GinkgoHelper()
	Expect(exec.Command("cp", "-r", src, dst).Run()).To(Succeed())
	files, err := filepath.Glob(filepath.Join(dst, packageName, "bundle-v*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(files).To(HaveLen(len(bundles)), "a bundle directory for every version of %s", src)
	for _, f := range files {
		version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "bundle-v"), ".yaml")
		dir, ok := bundles[version]
		Expect(ok).To(BeTrue(), "no bundle directory for version %s", version)
		var out, stderr bytes.Buffer
		cmd := exec.Command(opm, "render", dir, "-o", "yaml")
		cmd.Stdout, cmd.Stderr = &out, &stderr
		Expect(cmd.Run()).To(Succeed(), stderr.String())
		Expect(out.String()).To(ContainSubstring("\nimage: \"\"\n"), "rendered without an image")
		Expect(out.String()).To(ContainSubstring("olm.bundle.object"), "the manifests inline")
		Expect(os.WriteFile(f, out.Bytes(), 0o644)).To(Succeed())
	}
	out, err := exec.Command(opm, "validate", dst).CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
}

// serveCatalog serves the catalog in dir with `opm serve` on a loopback port and returns the
// address, once it answers.
func serveCatalog(name, dir string) (*localpod.Process, string) {
	GinkgoHelper()
	port, tmp := localpod.FreePort(), GinkgoT().TempDir()
	p := &localpod.Process{
		Name: name,
		Path: opm,
		Args: []string{"serve", dir, "--port", strconv.Itoa(port), "--pprof-addr", "127.0.0.1:" + strconv.Itoa(localpod.FreePort()),
			"--termination-log", filepath.Join(tmp, "termination-log")},
		Env:     localpod.Environ(),
		LogFile: filepath.Join(logDir, name+".log"),
	}
	p.Start()
	// Served for the rest of the suite, as a catalog's pod would be.
	catalogServers = append(catalogServers, p)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	Eventually(func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
		}
		return err
	}).Should(Succeed(), fmt.Sprintf("opm serve %s on %s", dir, addr))
	return p, addr
}
