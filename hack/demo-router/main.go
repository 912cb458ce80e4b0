// Command demo-router shows the pipeline router on this machine (make demo-router): it starts
// a fake face detector and a fake face recognizer on loopback addresses, runs the router
// binary in front of them and sends pictures through, one with faces (both steps answer) and
// one without (the pipeline ends after the detector, by its stopWhen).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
)

func main() {
	bin := flag.String("router", "bin/router", "The router binary.")
	flag.Parse()
	if err := demo(*bin); err != nil {
		fmt.Fprintln(os.Stderr, "demo-router:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Printf("\n\033[1m== "+format+"\033[0m\n", args...) }

func demo(bin string) error {
	det, rec := &detector{}, &recognizer{}
	detURL, err := serve(det)
	if err != nil {
		return err
	}
	recURL, err := serve(rec)
	if err != nil {
		return err
	}
	say("step servers: fake face detector on %s, fake recognizer on %s", detURL, recURL)

	cfg := routerconfig.Config{
		Pipeline: "default/facedetection-pipeline",
		Steps: []routerconfig.Step{
			{Name: "detect", URL: detURL + "/infer", TimeoutSeconds: 5, Retries: 2, StopWhen: "size(response.faces) == 0"},
			{Name: "recognize", URL: recURL + "/", TimeoutSeconds: 10},
		},
		PropagateHeaders: []string{"X-User"},
	}
	dir, err := os.MkdirTemp("", "demo-router-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	file := filepath.Join(dir, "router.json")
	data, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return err
	}
	say("router config (%s)", file)
	fmt.Println(string(data))

	cmd := exec.Command(bin, "--config", file, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0")
	addrs, err := start(cmd)
	if err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill() }()
	say("router running: pipeline on http://%s, metrics on http://%s", addrs[0], addrs[1])

	say("a picture with two faces: both steps run")
	if err := send(addrs[0], `{"image": "family.jpg", "pixels": "..:)....:)..."}`, "recognize"); err != nil {
		return err
	}
	say("a picture without a face: the detector's stopWhen holds and the pipeline ends there")
	if err := send(addrs[0], `{"image": "landscape.jpg", "pixels": "~~~~^^^^~~~~"}`, "detect"); err != nil {
		return err
	}
	fmt.Printf("calls so far: detector %d, recognizer %d\n", det.calls.Load(), rec.calls.Load())
	if det.calls.Load() != 2 || rec.calls.Load() != 1 {
		return errors.New("the steps were not called as the pipeline says: detector twice, recognizer once")
	}

	say("per-step metrics (http://%s/metrics)", addrs[1])
	if err := showMetrics(addrs[1]); err != nil {
		return err
	}

	say("SIGTERM: the router finishes what is in flight and exits")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("router exit: %w", err)
		}
		fmt.Println("router exited cleanly")
	case <-time.After(30 * time.Second):
		return errors.New("the router did not exit within 30 s of SIGTERM")
	}
	return nil
}

// serve serves h on a loopback port and returns its URL.
func serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { _ = http.Serve(ln, h) }()
	return "http://" + ln.Addr().String(), nil
}

// start starts the router, echoes its log and returns its two addresses once it serves.
func start(cmd *exec.Cmd) ([2]string, error) {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return [2]string{}, err
	}
	if err := cmd.Start(); err != nil {
		return [2]string{}, fmt.Errorf("start the router (make demo-router builds it): %w", err)
	}
	re := regexp.MustCompile(` listen=(\S+) metricsListen=(\S+)`)
	found := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Println("  [router]", sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- [2]string{m[1], m[2]}
			}
		}
	}()
	select {
	case a := <-found:
		return a, nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		return [2]string{}, errors.New("the router did not start within 30 s")
	}
}

// send posts a picture through the router and checks which step answered.
func send(addr, body, wantLast string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+addr+"/", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User", "demo")
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	fmt.Printf("> POST / %s\n", body)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	fmt.Printf("< %s\n< %s: %s\n< %s: %s\n< %s", res.Status, routerconfig.HeaderLastStep, res.Header.Get(routerconfig.HeaderLastStep),
		routerconfig.HeaderRequestID, res.Header.Get(routerconfig.HeaderRequestID), b)
	if res.StatusCode != http.StatusOK || res.Header.Get(routerconfig.HeaderLastStep) != wantLast {
		return fmt.Errorf("the router answered %s from step %q, want 200 from %q",
			res.Status, res.Header.Get(routerconfig.HeaderLastStep), wantLast)
	}
	return nil
}

func showMetrics(addr string) error {
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "pipeline_router_requests_total") || strings.HasPrefix(l, "pipeline_router_step_duration_seconds_count") ||
			strings.HasPrefix(l, "pipeline_router_step_duration_seconds_sum") || strings.HasPrefix(l, "pipeline_router_step_retries_total") {
			fmt.Println(l)
		}
	}
	return sc.Err()
}
