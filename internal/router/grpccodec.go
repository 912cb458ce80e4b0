package router

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip/inferencepb"
)

// wireMessage is a ModelInfer or ModelMetadata message as it came, not decoded: the router
// checks its encoding against its bounds before protobuf makes its tensors
// (oip.Reader.UnmarshalGRPCRequest and its siblings).
type wireMessage struct {
	buf mem.Buffer
}

// bytes are the message's encoding.
func (w *wireMessage) bytes() []byte { return w.buf.ReadOnlyData() }

// free gives the message's bytes back to gRPC's pool.
func (w *wireMessage) free() {
	if w.buf != nil {
		w.buf.Free()
		w.buf = nil
	}
}

// wireCodec is gRPC's protobuf codec, but that a message received into a *wireMessage is kept
// as it came. The router's gRPC server and its clients of gRPC steps use it.
type wireCodec struct {
	encoding.CodecV2
}

func newWireCodec() wireCodec { return wireCodec{encoding.GetCodecV2(grpcproto.Name)} }

func (c wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if w, ok := v.(*wireMessage); ok {
		w.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// grpcServiceDesc is the protocol's service whose ModelInfer takes its message undecoded.
func grpcServiceDesc() *grpc.ServiceDesc {
	desc := inferencepb.GRPCInferenceService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	i := slices.IndexFunc(desc.Methods, func(m grpc.MethodDesc) bool { return m.MethodName == "ModelInfer" })
	desc.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var w wireMessage
		if err := dec(&w); err != nil {
			return nil, err
		}
		return srv.(*grpcService).modelInfer(ctx, &w)
	}
	return &desc
}

// invoke calls method on conn with req, its answer received undecoded into res.
func invoke(ctx context.Context, conn *grpc.ClientConn, method string, req any, res *wireMessage, opts ...grpc.CallOption) error {
	err := conn.Invoke(ctx, method, req, res, opts...)
	if err != nil {
		// The answer may have come before the call failed.
		res.free()
	}
	return err
}
