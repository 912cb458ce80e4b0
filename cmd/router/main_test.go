package main

import (
	"bytes"
	"context"
	"io"
	stdlog "log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the router's logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func writeConfig(t *testing.T, json string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "router.json")
	if err := os.WriteFile(f, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestRunRefusesAStopWhenThatDoesNotCompile(t *testing.T) {
	f := writeConfig(t, `{"pipeline": "default/p", "steps": [{"name": "detect", "url": "http://127.0.0.1:1/",
		"stopWhen": "size(response.faces) =="}]}`)
	var out syncBuffer
	err := run(context.Background(), []string{"--config", f, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, &out)
	if err == nil || !strings.Contains(err.Error(), "steps[0]: stopWhen: ERROR") {
		t.Fatalf("run: %v, want the compiler's error for steps[0]", err)
	}
	// The standard library's log (net/http's notes) goes through the router's handler.
	stdlog.Print("a note of net/http")
	if got := out.String(); !strings.Contains(got, `level=INFO msg="a note of net/http"`) {
		t.Errorf("the standard library's log is not the router's: %q", got)
	}
}

func TestRunRequiresAConfig(t *testing.T) {
	if err := run(context.Background(), []string{"--listen", "127.0.0.1:0"}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "--config") {
		t.Fatalf("run: %v", err)
	}
}

func TestRunRefusesANegativeRetryBudgetFloor(t *testing.T) {
	f := writeConfig(t, `{"steps": [{"name": "detect", "url": "http://127.0.0.1:1/"}]}`)
	err := run(context.Background(), []string{"--config", f, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--retry-budget-min-per-second=-1"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--retry-budget-min-per-second") {
		t.Fatalf("run: %v, want the flag refused", err)
	}
}

// TestRunStopsGracefullyOnSIGTERM sends SIGTERM to the test process while a request is in
// flight: the signal context that main uses catches it, the request finishes, run returns nil.
func TestRunStopsGracefullyOnSIGTERM(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	step := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		close(entered)
		<-release
		_, _ = w.Write(append(b, "|done"...))
	}))
	defer step.Close()
	f := writeConfig(t, `{"pipeline": "default/p", "steps": [{"name": "one", "url": "`+step.URL+`"}]}`)

	ctx, stop := signalContext()
	defer stop()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--config", f, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, &out)
	}()
	addr := regexp.MustCompile(` listen=(\S+)`)
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m = addr.FindStringSubmatch(out.String())
	}
	if m == nil {
		t.Fatalf("the router did not say where it listens: %s", out.String())
	}

	answer := make(chan string, 1)
	go func() {
		res, err := http.Post("http://"+m[1]+"/", "text/plain", strings.NewReader("in"))
		if err != nil {
			answer <- err.Error()
			return
		}
		defer func() { _ = res.Body.Close() }()
		b, _ := io.ReadAll(res.Body)
		answer <- res.Status + " " + string(b)
	}()
	<-entered
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	close(release)
	if got := <-answer; got != "200 OK in|done" {
		t.Errorf("the request in flight at SIGTERM: %s", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}
}

func TestRunStopsOnAMappingTheModelRefuses(t *testing.T) {
	// A model server whose model takes an input named "pixels", not "image".
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"name":"resnet","inputs":[{"name":"pixels","datatype":"FP32","shape":[-1,3]}],"outputs":[]}`)
	}))
	defer model.Close()
	f := writeConfig(t, `{"pipeline": "default/p", "steps": [{"name": "classify", "url": "`+model.URL+`/v2/models/resnet/infer",
		"protocol": "OpenInferenceProtocol", "metadataURL": "`+model.URL+`/v2/models/resnet",
		"inputs": [{"name": "image", "tensor": "input0"}]}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := run(ctx, []string{"--config", f, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, io.Discard)
	want := `the tensor mappings do not fit the models: input "image" of step 1 (classify): model resnet has no input "image" (its inputs: pixels)`
	if err == nil || err.Error() != want {
		t.Fatalf("run: %v, want %q", err, want)
	}
}

func TestWriteTerminationMessage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "termination-log")
	writeTerminationMessage(path, "not written")
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a termination log was created where none was: %v", err)
	}
	if err := os.WriteFile(path, []byte("an older, longer message"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeTerminationMessage(path, strings.Repeat("x", maxTerminationMessage+10))
	if got, _ := os.ReadFile(path); len(got) != maxTerminationMessage || got[0] != 'x' {
		t.Fatalf("termination log has %d bytes", len(got))
	}
}
