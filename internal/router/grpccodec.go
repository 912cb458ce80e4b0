package router

import (
	"context"

	"google.golang.org/grpc"

	"github.com/ndsl-cn/pipeline-operator/internal/router/oip"
)

// grpcServiceDesc is the protocol's service whose ModelInfer is grpcService.modelInfer, its
// message undecoded.
func grpcServiceDesc() *grpc.ServiceDesc {
	return oip.ServiceDesc(func(srv any, ctx context.Context, m *oip.WireMessage) (any, error) {
		return srv.(*grpcService).modelInfer(ctx, m)
	})
}

// invoke calls method on conn with req, its answer received undecoded into res (the
// connection's codec is oip.WireCodec).
func invoke(ctx context.Context, conn *grpc.ClientConn, method string, req any, res *oip.WireMessage, opts ...grpc.CallOption) error {
	err := conn.Invoke(ctx, method, req, res, opts...)
	if err != nil {
		// The answer may have come before the call failed.
		res.Free()
	}
	return err
}
