package main

import (
	"context"
	"encoding/binary"
	"math"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// newGRPCServer is the gRPC server of s: requests of at most maxRequest, a ModelInfer message
// checked within the protocol's default bounds (oip.Reader) before it is decoded.
func newGRPCServer(s *server) *grpc.Server {
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxRequest), grpc.ForceServerCodecV2(oip.WireCodec()))
	srv.RegisterService(oip.ServiceDesc(func(srv any, ctx context.Context, m *oip.WireMessage) (any, error) {
		req, _, err := oip.Reader{}.UnmarshalGRPCRequest(m.Bytes())
		m.Free()
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		return srv.(*grpcServer).ModelInfer(ctx, req)
	}), &grpcServer{s: s})
	return srv
}

// grpcServer serves the model by the Open Inference Protocol's gRPC service
// (inference.GRPCInferenceService), as -grpc asks.
type grpcServer struct {
	inferencepb.UnimplementedGRPCInferenceServiceServer
	s *server
}

func (g *grpcServer) ServerLive(context.Context, *inferencepb.ServerLiveRequest) (*inferencepb.ServerLiveResponse, error) {
	return &inferencepb.ServerLiveResponse{Live: true}, nil
}

func (g *grpcServer) ServerReady(context.Context, *inferencepb.ServerReadyRequest) (*inferencepb.ServerReadyResponse, error) {
	return &inferencepb.ServerReadyResponse{Ready: g.s.model.Load() != nil}, nil
}

// loaded is the model named name once loaded: NOT_FOUND for another, UNAVAILABLE while it loads.
func (g *grpcServer) loaded(name string) (*model, error) {
	if name != g.s.name {
		return nil, status.Errorf(codes.NotFound, "this server serves model %s, not %s", g.s.name, name)
	}
	m := g.s.model.Load()
	if m == nil {
		return nil, status.Errorf(codes.Unavailable, "model %s is loading", g.s.name)
	}
	return m, nil
}

func (g *grpcServer) ModelReady(_ context.Context, req *inferencepb.ModelReadyRequest) (*inferencepb.ModelReadyResponse, error) {
	_, err := g.loaded(req.GetName())
	if status.Code(err) == codes.NotFound {
		return nil, err
	}
	return &inferencepb.ModelReadyResponse{Ready: err == nil}, nil
}

func (g *grpcServer) ModelMetadata(_ context.Context, req *inferencepb.ModelMetadataRequest) (*inferencepb.ModelMetadataResponse, error) {
	m, err := g.loaded(req.GetName())
	if err != nil {
		return nil, err
	}
	res := &inferencepb.ModelMetadataResponse{Name: g.s.name, Versions: []string{"1"}, Platform: "modelserver-" + m.Kind}
	for _, t := range m.inputs() {
		res.Inputs = append(res.Inputs, &inferencepb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
	}
	for _, t := range m.outputs() {
		res.Outputs = append(res.Outputs, &inferencepb.ModelMetadataResponse_TensorMetadata{Name: t.Name, Datatype: t.Datatype, Shape: t.Shape})
	}
	return res, nil
}

// ModelInfer reads the model's input from typed contents (fp32_contents or fp64_contents) or
// raw contents (little-endian FP32 or FP64), and answers typed contents.
func (g *grpcServer) ModelInfer(_ context.Context, req *inferencepb.ModelInferRequest) (*inferencepb.ModelInferResponse, error) {
	m, err := g.loaded(req.GetModelName())
	if err != nil {
		return nil, err
	}
	var inputs []inferInput
	for i, in := range req.GetInputs() {
		var flat []float64
		switch raw := req.GetRawInputContents(); {
		case len(raw) > i && in.GetDatatype() == "FP32":
			for j := 0; j+4 <= len(raw[i]); j += 4 {
				flat = append(flat, float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[i][j:]))))
			}
		case len(raw) > i && in.GetDatatype() == "FP64":
			for j := 0; j+8 <= len(raw[i]); j += 8 {
				flat = append(flat, math.Float64frombits(binary.LittleEndian.Uint64(raw[i][j:])))
			}
		default:
			for _, v := range in.GetContents().GetFp32Contents() {
				flat = append(flat, float64(v))
			}
			flat = append(flat, in.GetContents().GetFp64Contents()...)
		}
		if flat == nil {
			flat = []float64{}
		}
		inputs = append(inputs, inferInput{Name: in.GetName(), Datatype: in.GetDatatype(), Shape: in.GetShape(), flat: flat})
	}
	rows, err := inputRows(m, inputs)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	res := &inferencepb.ModelInferResponse{ModelName: g.s.name, ModelVersion: "1", Id: req.GetId()}
	for _, out := range m.compute(rows) {
		t := &inferencepb.ModelInferResponse_InferOutputTensor{Name: out.Name, Datatype: out.Datatype, Shape: out.Shape,
			Contents: &inferencepb.InferTensorContents{}}
		switch data := out.Data.(type) {
		case []float64:
			for _, v := range data {
				t.Contents.Fp32Contents = append(t.Contents.Fp32Contents, float32(v))
			}
		case []string:
			for _, v := range data {
				t.Contents.BytesContents = append(t.Contents.BytesContents, []byte(v))
			}
		default:
			return nil, status.Errorf(codes.Internal, "output %s: data of type %T", out.Name, out.Data)
		}
		res.Outputs = append(res.Outputs, t)
	}
	return res, nil
}
