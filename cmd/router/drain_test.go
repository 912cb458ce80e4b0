package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildRouter builds this command into a temporary directory.
func buildRouter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "router")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// poll calls cond every 10 ms for at most 20 s.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 20 s", what)
}

func status(url string) int {
	res, err := http.Get(url)
	if err != nil {
		return 0
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// TestRouterDrainsOnSIGTERM runs the router binary, sends it SIGTERM while a request waits on a
// slow step, and checks the drain: /readyz fails at once, new requests are still served during
// --shutdown-delay and refused after it, the slow request completes, and the exit code is 0.
func TestRouterDrainsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the router binary")
	}
	entered, release := make(chan struct{}), make(chan struct{})
	step := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) == "slow" {
			close(entered)
			<-release
		}
		_, _ = w.Write(append(b, "|done"...))
	}))
	defer step.Close()
	f := writeConfig(t, `{"pipeline": "default/p", "steps": [{"name": "one", "url": "`+step.URL+`"}]}`)

	var out syncBuffer
	cmd := exec.Command(buildRouter(t), "--config", f, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--shutdown-delay", "5s")
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()
	addr := regexp.MustCompile(` listen=(\S+) metricsListen=(\S+)`)
	var m []string
	poll(t, "the router saying where it listens", func() bool { m = addr.FindStringSubmatch(out.String()); return m != nil })
	url, admin := "http://"+m[1], "http://"+m[2]
	if got := status(admin + "/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz before SIGTERM: %d", got)
	}

	answer := make(chan string, 1)
	go func() { answer <- postText(url, "slow") }()
	<-entered
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	poll(t, "/readyz failing after SIGTERM", func() bool { return status(admin+"/readyz") == http.StatusServiceUnavailable })
	// During the shutdown delay, a new request is still served.
	if got := postText(url, "fast"); got != "200 OK fast|done" {
		t.Errorf("a new request during the shutdown delay: %s", got)
	}
	// After it, new connections are refused while the slow request is still in flight.
	poll(t, "new connections refused", func() bool {
		c, err := net.DialTimeout("tcp", m[1], time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	})
	select {
	case err := <-exited:
		t.Fatalf("the router exited with a request in flight: %v\n%s", err, out.String())
	default:
	}
	close(release)
	if got := <-answer; got != "200 OK slow|done" {
		t.Errorf("the request in flight at SIGTERM: %s", got)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the router exited with %v, want 0\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the router did not exit after its last request")
	}
}

func postText(url, body string) string {
	res, err := http.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		return err.Error()
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(res.Body)
	return res.Status + " " + string(b)
}
