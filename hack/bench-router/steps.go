package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// stepServers are the pipeline's steps: echo servers on loopback addresses, each also an Open
// Inference Protocol server of one model at modelPath (tensorEcho).
type stepServers struct {
	urls    []string
	servers []*http.Server
}

// stepsProcess is the pipeline's steps in a process of their own, as the pods they stand for:
// so that the callers' calls to them cross from one process to another whether they go through
// a router or not. (Steps in the callers' process would let the direct chain hand each call
// over inside one Go runtime, and charge every router for crossing processes, which a caller
// calling step pods does too.)
type stepsProcess struct {
	urls []string
	// grpcURLs are its gRPC steps (grpc://host:port), grpcSteps of them.
	grpcURLs []string
	cmd      *exec.Cmd
	// stdin is held open: the child serves until it closes.
	stdin io.Closer
}

// startStepsProcess runs n steps and grpcSteps gRPC steps in a child process (this program,
// with -serve-steps) and returns once they serve.
func startStepsProcess(ctx context.Context, n int) (*stepsProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-serve-steps", strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &stepsProcess{cmd: cmd, stdin: stdin}
	lines := bufio.NewScanner(stdout)
	for len(p.urls)+len(p.grpcURLs) < n+grpcSteps && lines.Scan() {
		if u := lines.Text(); strings.HasPrefix(u, "grpc://") {
			p.grpcURLs = append(p.grpcURLs, u)
		} else {
			p.urls = append(p.urls, u)
		}
	}
	if len(p.urls) < n || len(p.grpcURLs) < grpcSteps {
		p.stop()
		return nil, fmt.Errorf("the steps' process gave %d step URLs of %d and %d gRPC step URLs of %d",
			len(p.urls), n, len(p.grpcURLs), grpcSteps)
	}
	return p, nil
}

func (p *stepsProcess) stop() {
	_ = p.stdin.Close()
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// serveSteps is the child's side: n steps and grpcSteps gRPC steps, their URLs on standard
// output, until standard input closes.
func serveSteps(n int) error {
	steps, err := startSteps(n)
	if err != nil {
		return err
	}
	defer steps.close()
	grpcURLs, stop, err := startGRPCSteps(grpcSteps)
	if err != nil {
		return err
	}
	defer stop()
	for _, u := range append(steps.urls, grpcURLs...) {
		fmt.Println(u)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// echo answers the JSON body it is sent, as a model server that transforms its input in place
// would, without the model's time.
func echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func startSteps(n int) (*stepServers, error) {
	s := &stepServers{}
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.close()
			return nil, err
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/", echo)
		mux.HandleFunc("GET "+modelPath, modelMetadata("echo", "x"))
		mux.HandleFunc("POST "+modelPath+"/infer", tensorEcho)
		mux.HandleFunc("GET "+slowModelPath, modelMetadata("slow", "x"))
		mux.HandleFunc("POST "+slowModelPath+"/infer", func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(modelTime)
			tensorEcho(w, r)
		})
		mux.HandleFunc("GET "+pairModelPath, modelMetadata("pair", "a", "b"))
		mux.HandleFunc("POST "+pairModelPath+"/infer", tensorEcho)
		srv := &http.Server{Handler: mux}
		go func() { _ = srv.Serve(ln) }()
		s.servers = append(s.servers, srv)
		s.urls = append(s.urls, "http://"+ln.Addr().String()+"/infer")
	}
	return s, nil
}

func (s *stepServers) close() {
	for _, srv := range s.servers {
		_ = srv.Close()
	}
}

// requestBody is a JSON document of about size bytes: {"items": ["xxxx", ...]}.
func requestBody(size int) []byte {
	var items []string
	for n := 12; n < size; n += 67 {
		items = append(items, strings.Repeat("x", 64))
	}
	b, _ := json.Marshal(map[string][]string{"items": items})
	return b
}
