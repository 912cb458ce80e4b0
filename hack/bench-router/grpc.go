package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	routerconfig "github.com/ndsl-cn/pipeline-operator/internal/router/config"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

const (
	// grpcSteps is how many gRPC steps the steps' process serves.
	grpcSteps = 2
	// echoModel is the model of every gRPC step, as modelPath is of every REST one.
	echoModel = "echo"
	// grpcMaxMessage is the largest message the gRPC callers and steps take, and the routers'
	// maxBodyBytes.
	grpcMaxMessage = 16 << 20
)

// grpcEcho serves the Open Inference Protocol's gRPC service with one model, echo: one FP32
// input x of any length, answered as its output x. It answers every input of a request as an
// output of the same name, type, shape and parameters, typed contents as typed contents and
// raw contents back as raw contents, untouched, and no model time.
type grpcEcho struct {
	inferencepb.UnimplementedGRPCInferenceServiceServer
}

func (grpcEcho) ModelMetadata(_ context.Context, req *inferencepb.ModelMetadataRequest) (*inferencepb.ModelMetadataResponse, error) {
	if req.GetName() != echoModel {
		return nil, status.Errorf(codes.NotFound, "no model %q", req.GetName())
	}
	x := []*inferencepb.ModelMetadataResponse_TensorMetadata{{Name: "x", Datatype: "FP32", Shape: []int64{1, -1}}}
	return &inferencepb.ModelMetadataResponse{Name: echoModel, Platform: "bench", Inputs: x, Outputs: x}, nil
}

func (grpcEcho) ModelInfer(_ context.Context, req *inferencepb.ModelInferRequest) (*inferencepb.ModelInferResponse, error) {
	if req.GetModelName() != echoModel {
		return nil, status.Errorf(codes.NotFound, "no model %q", req.GetModelName())
	}
	res := &inferencepb.ModelInferResponse{ModelName: echoModel, Id: req.GetId(), RawOutputContents: req.GetRawInputContents()}
	for _, t := range req.GetInputs() {
		res.Outputs = append(res.Outputs, &inferencepb.ModelInferResponse_InferOutputTensor{Name: t.GetName(),
			Datatype: t.GetDatatype(), Shape: t.GetShape(), Parameters: t.GetParameters(), Contents: t.GetContents()})
	}
	return res, nil
}

// startGRPCSteps serves n gRPC steps of model echo on loopback addresses and returns their URLs
// (grpc://host:port) and what stops them.
func startGRPCSteps(n int) ([]string, func(), error) {
	var urls []string
	var servers []*grpc.Server
	stop := func() {
		for _, s := range servers {
			s.Stop()
		}
	}
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stop()
			return nil, nil, err
		}
		srv := grpc.NewServer(grpc.MaxRecvMsgSize(grpcMaxMessage))
		inferencepb.RegisterGRPCInferenceServiceServer(srv, grpcEcho{})
		go func() { _ = srv.Serve(ln) }()
		servers = append(servers, srv)
		urls = append(urls, "grpc://"+ln.Addr().String())
	}
	return urls, stop, nil
}

// grpcBench is what the router's gRPC service and gRPC steps cost one caller of a 1 MiB tensor:
// two steps through the router over REST and over gRPC, and one gRPC step called directly and
// through the router.
type grpcBench struct {
	variants []*grpcVariant
	rounds   int
	duration time.Duration
}

type grpcVariant struct {
	name string
	call func(context.Context) error
	series
}

// The variants of grpcBench, in its order.
const (
	grpcRESTTwo = iota
	grpcTwo
	grpcDirect
	grpcOne
)

// echoChain is a pipeline of steps of model echo, each given x: the first the request's, every
// other the answer's of the step before it.
func echoChain(pipeline string, steps ...routerconfig.Step) routerconfig.Config {
	cfg := routerconfig.Config{Pipeline: pipeline, MaxBodyBytes: grpcMaxMessage}
	for i, s := range steps {
		s.Name, s.TimeoutSeconds = "echo-"+strconv.Itoa(i+1), 30
		s.Inputs = []routerconfig.TensorInput{{Name: "x", Tensor: "x"}}
		if i > 0 {
			s.Inputs[0].Step = "echo-" + strconv.Itoa(i)
		}
		cfg.Steps = append(cfg.Steps, s)
	}
	return cfg
}

// restEchoStep is the REST step at stepURL (one of the steps' process), model echo.
func restEchoStep(stepURL string) routerconfig.Step {
	base := strings.TrimSuffix(stepURL, "/infer") + modelPath
	return routerconfig.Step{URL: base + "/infer", Protocol: routerconfig.ProtocolOpenInference, MetadataURL: base}
}

// grpcEchoStep is the gRPC step at url, model echo.
func grpcEchoStep(url string) routerconfig.Step {
	return routerconfig.Step{URL: url, Protocol: routerconfig.ProtocolOpenInferenceGRPC, Model: echoModel}
}

func measureGRPC(ctx context.Context, o options, steps *stepsProcess) (*grpcBench, []*process, error) {
	gb := &grpcBench{rounds: o.rounds, duration: o.duration}
	procs, closers, err := gb.start(ctx, o.router, steps)
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	if err != nil {
		return nil, procs, err
	}
	interleave(gb.rounds, "gRPC", gb.variants, func(v *grpcVariant) string { return v.name }, func(v *grpcVariant) {
		v.measure(ctx, o.warmup, o.duration, v.call)
	})
	return gb, procs, nil
}

// start starts the routers of the variants and their callers, and checks that every variant
// answers the tensor back; it returns the routers and what closes the callers' connections.
func (gb *grpcBench) start(ctx context.Context, router string, steps *stepsProcess) ([]*process, []func() error, error) {
	var procs []*process
	var closers []func() error
	startRouter := func(cfg routerconfig.Config, flags ...string) (*process, error) {
		p, err := startRouterConfig(ctx, router, cfg, flags...)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
		return p, waitReady(ctx, p)
	}
	grpcCaller := func(addr, model string) (func(context.Context) error, error) {
		c, err := newGRPCCaller(addr, model)
		if err != nil {
			return nil, err
		}
		closers = append(closers, c.conn.Close)
		return c.call, c.check(ctx)
	}
	grpcListen := "--grpc-listen=127.0.0.1:0"
	gb.variants = []*grpcVariant{{name: "REST, two steps through the router"}, {name: "gRPC, two steps through the router"},
		{name: "gRPC, one step called directly"}, {name: "gRPC, one step through the router"}}
	for i, v := range gb.variants {
		var p *process
		var err error
		switch i {
		case grpcRESTTwo:
			if p, err = startRouter(echoChain("bench/rest", restEchoStep(steps.urls[0]), restEchoStep(steps.urls[1]))); err == nil {
				v.call, err = restCaller(ctx, p.url)
			}
		case grpcTwo:
			if p, err = startRouter(echoChain("bench/grpc", grpcEchoStep(steps.grpcURLs[0]), grpcEchoStep(steps.grpcURLs[1])), grpcListen); err == nil {
				v.call, err = grpcCaller(p.grpcAddr, "grpc")
			}
		case grpcDirect:
			v.call, err = grpcCaller(strings.TrimPrefix(steps.grpcURLs[0], "grpc://"), echoModel)
		case grpcOne:
			if p, err = startRouter(echoChain("bench/grpc-one", grpcEchoStep(steps.grpcURLs[0])), grpcListen); err == nil {
				v.call, err = grpcCaller(p.grpcAddr, "grpc-one")
			}
		}
		if err != nil {
			return procs, closers, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	return procs, closers, nil
}

// restCaller calls the router at url with x as binary data, as the tensor mapping's mapped,
// binary variant does, once to check the answer, and returns its call.
func restCaller(ctx context.Context, url string) (func(context.Context) error, error) {
	v := &mappingVariant{mapped: true, bin: true, url: url}
	v.body, v.headerLength = mappingRequest(true)
	call := func(ctx context.Context) error {
		_, err := v.call(ctx)
		return err
	}
	return call, call(ctx)
}

// grpcCaller calls ModelInfer of one model with x, 1 MiB of FP32 as raw_input_contents, on a
// connection of its own.
type grpcCaller struct {
	conn   *grpc.ClientConn
	client inferencepb.GRPCInferenceServiceClient
	req    *inferencepb.ModelInferRequest
}

func newGRPCCaller(addr, model string) (*grpcCaller, error) {
	if addr == "" {
		return nil, errors.New("no gRPC address (does the router define --grpc-listen?)")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcMaxMessage)))
	if err != nil {
		return nil, err
	}
	body, headerLength := mappingRequest(true)
	req := &inferencepb.ModelInferRequest{ModelName: model, RawInputContents: [][]byte{body[headerLength:]},
		Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, tensorElements}}}}
	return &grpcCaller{conn: conn, client: inferencepb.NewGRPCInferenceServiceClient(conn), req: req}, nil
}

// call makes one call and checks that the answer is x back, of its size.
func (c *grpcCaller) call(ctx context.Context) error {
	_, err := c.infer(ctx)
	return err
}

// check makes one call and checks that the answer is x back, byte for byte.
func (c *grpcCaller) check(ctx context.Context) error {
	raw, err := c.infer(ctx)
	if err == nil && !bytes.Equal(raw, c.req.GetRawInputContents()[0]) {
		err = errors.New("answered x with other contents than it was sent")
	}
	return err
}

// infer makes one call, checks that the answer is x of the size sent, and returns its raw
// contents.
func (c *grpcCaller) infer(ctx context.Context) ([]byte, error) {
	res, err := c.client.ModelInfer(ctx, c.req)
	if err != nil {
		return nil, err
	}
	out, raw := res.GetOutputs(), res.GetRawOutputContents()
	if len(out) != 1 || out[0].GetName() != "x" || out[0].GetDatatype() != "FP32" || oip.Elements(out[0].GetShape()) != tensorElements ||
		len(raw) != 1 || len(raw[0]) != 4*tensorElements {
		return nil, fmt.Errorf("answered %d outputs and %d raw contents, not x back as raw contents of %d bytes", len(out), len(raw), 4*tensorElements)
	}
	return raw[0], nil
}

func (gb *grpcBench) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## gRPC\n\nThe tensor mapping's tensor x, FP32 of %d elements (1 MiB), as binary data over REST "+
		"(`%s`) and as `raw_input_contents` over gRPC. The steps answer their input as their output and take no model "+
		"time: over REST the steps' model echo, over gRPC %d servers of the Open Inference Protocol's gRPC service "+
		"(`inference.GRPCInferenceService`) in the steps' process, which answer raw contents back as raw contents. "+
		"Through the router every step has x mapped (`inputs`): the first from the request, the second from the first's "+
		"answer; the gRPC steps are of protocol `OpenInferenceProtocolGRPC`, and the gRPC callers call the router's gRPC "+
		"service (`--grpc-listen`). One caller on one connection; %d rounds of %s per variant, interleaved; medians of "+
		"every call.\n\n",
		tensorElements, oip.HeaderInferenceHeaderLength, grpcSteps, gb.rounds, gb.duration)
	b.WriteString("| variant | calls | median latency | compared |\n|---|---|---|---|\n")
	med := func(i int) time.Duration { return gb.variants[i].median() }
	for i, v := range gb.variants {
		compared := ""
		switch {
		case i == grpcTwo && med(grpcRESTTwo) > 0:
			compared = fmt.Sprintf("gRPC / REST: %.2f", float64(med(grpcTwo))/float64(med(grpcRESTTwo)))
		case i == grpcOne && med(grpcDirect) > 0:
			compared = fmt.Sprintf("the router's overhead per hop: %s (%.2f × direct)", ms(med(grpcOne)-med(grpcDirect)),
				float64(med(grpcOne))/float64(med(grpcDirect)))
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", v.name, len(v.latencies), ms(v.median()), compared)
		if v.failures > 0 {
			fmt.Fprintf(&b, "\n%s: %d calls failed, the first with: %v\n\n", v.name, v.failures, v.firstError)
		}
	}
	b.WriteString("\nThe router's overhead per hop is the median through the router less the median of the same step called " +
		"directly: the hop from the router to the step, and what the router does between them. The router carries a gRPC " +
		"request as a REST body of the protocol (raw contents as binary data), and makes each step's ModelInfer of it and " +
		"each answer a REST body again. Every answer is checked to be x of 1 MiB; the first of each variant, byte for byte.\n")
	return b.String()
}
