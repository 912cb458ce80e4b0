// Command modelserver is a small reference server of the Open Inference Protocol (KServe v2),
// for trying pipelines on real nodes without an accelerator or a large image: it loads one model
// of a model repository (a directory per model, holding model.json) and computes with it.
//
// Two models ship in models/: iris-scaler standardizes the four measurements of an iris flower
// (sepal length and width, petal length and width, in cm), iris-classifier names its species
// from the standardized measurements (setosa, versicolor or virginica) with its probabilities.
// Chained, they classify a flower: [5.1, 3.5, 1.4, 0.2] is a setosa.
//
//	modelserver [-listen :8000] [-model NAME] [-model-dir DIR] [-load-delay 2s] [-grpc]
//
// The model is $MODEL_NAME in $MODEL_PATH unless the flags say otherwise (the operator sets
// both for every step). The server answers the protocol's health, model readiness, metadata and
// infer paths; with -grpc it serves the protocol's gRPC service on -listen instead
// (ServerLive, ServerReady, ModelReady, ModelMetadata, ModelInfer). It is live at once and ready
// once the model is loaded, after -load-delay. A model
// that cannot be loaded ends the server with exit code 1 and the reason as its termination
// message.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// terminationLog is where the kubelet reads a container's termination message.
const terminationLog = "/dev/termination-log"

func main() {
	listen := flag.String("listen", ":8000", "Address to serve the protocol on.")
	name := flag.String("model", os.Getenv("MODEL_NAME"), "Name of the model to serve (default $MODEL_NAME).")
	dir := flag.String("model-dir", os.Getenv("MODEL_PATH"), "Directory of the model, holding model.json (default $MODEL_PATH).")
	delay := flag.Duration("load-delay", 2*time.Second, "How long loading the model takes, as a large model's would.")
	useGRPC := flag.Bool("grpc", false, "Serve the protocol's gRPC service on -listen instead of its REST paths.")
	flag.Parse()
	if *name == "" || *dir == "" {
		fail(errors.New("no model to serve: set -model and -model-dir, or MODEL_NAME and MODEL_PATH"))
	}

	s := &server{name: *name}
	srv := &http.Server{Addr: *listen, Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		log.Printf("loading model %s from %s", *name, *dir)
		start := time.Now()
		select {
		case <-time.After(*delay):
		case <-ctx.Done():
			return
		}
		m, err := loadModel(*dir)
		if err != nil {
			fail(fmt.Errorf("load model %s: %w", *name, err))
		}
		s.model.Store(m)
		log.Printf("model %s (%s) loaded in %s", *name, m.Kind, time.Since(start).Round(time.Millisecond))
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if *useGRPC {
		serveGRPC(ctx, *listen, s)
		return
	}
	log.Printf("serving the Open Inference Protocol on %s", *listen)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fail(err)
	}
}

// fail ends the server, leaving the reason where the kubelet reads it.
func fail(err error) {
	log.Print(err)
	_ = os.WriteFile(terminationLog, []byte(err.Error()), 0o644)
	os.Exit(1)
}

// serveGRPC serves the protocol's gRPC service on listen until ctx ends.
func serveGRPC(ctx context.Context, listen string, s *server) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fail(err)
	}
	srv := newGRPCServer(s)
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	log.Printf("serving the Open Inference Protocol's gRPC service on %s", listen)
	if err := srv.Serve(ln); err != nil {
		fail(err)
	}
}
