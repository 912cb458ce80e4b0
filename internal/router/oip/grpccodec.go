package oip

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// WireMessage is a gRPC message as it came, not decoded: its encoding is checked before
// protobuf makes its tensors (Reader.UnmarshalGRPCRequest and its siblings). A server or client
// of WireCodec receives into it.
type WireMessage struct {
	buf mem.Buffer
}

// Bytes are the message's encoding, until Free.
func (w *WireMessage) Bytes() []byte {
	if w.buf == nil {
		return nil
	}
	return w.buf.ReadOnlyData()
}

// Free gives the message's bytes back to gRPC's pool.
func (w *WireMessage) Free() {
	if w.buf != nil {
		w.buf.Free()
		w.buf = nil
	}
}

// wireCodec is gRPC's protobuf codec, but that a message received into a *WireMessage is kept
// as it came.
type wireCodec struct {
	encoding.CodecV2
}

// WireCodec is gRPC's protobuf codec, but that a message received into a *WireMessage is kept
// as it came: for grpc.ForceServerCodecV2 and grpc.ForceCodecV2.
func WireCodec() encoding.CodecV2 { return wireCodec{encoding.GetCodecV2(grpcproto.Name)} }

func (c wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if w, ok := v.(*WireMessage); ok {
		w.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// ServiceDesc is the protocol's service (inference.GRPCInferenceService) whose ModelInfer is
// modelInfer, given its message undecoded (the server's codec must be WireCodec); its other
// calls are the server's as generated.
func ServiceDesc(modelInfer func(srv any, ctx context.Context, m *WireMessage) (any, error)) *grpc.ServiceDesc {
	desc := inferencepb.GRPCInferenceService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	i := slices.IndexFunc(desc.Methods, func(m grpc.MethodDesc) bool { return m.MethodName == "ModelInfer" })
	desc.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var m WireMessage
		if err := dec(&m); err != nil {
			return nil, err
		}
		return modelInfer(srv, ctx, &m)
	}
	return &desc
}
