package router

import (
	"testing"

	"google.golang.org/grpc/codes"
)

// The mapping docs/router.md gives, both ways.
func TestGRPCStatusMapping(t *testing.T) {
	for status, want := range map[int]codes.Code{
		400: codes.InvalidArgument, 408: codes.InvalidArgument, 401: codes.Unauthenticated, 403: codes.PermissionDenied,
		404: codes.NotFound, 409: codes.Aborted, 413: codes.ResourceExhausted, 429: codes.ResourceExhausted,
		499: codes.Canceled, 501: codes.Unimplemented, 503: codes.Unavailable, 504: codes.DeadlineExceeded,
		422: codes.FailedPrecondition, 500: codes.Internal, 502: codes.Internal,
	} {
		if got := grpcCodeOf(status); got != want {
			t.Errorf("grpcCodeOf(%d) = %s, want %s", status, got, want)
		}
	}
	for code, want := range map[codes.Code]int{
		codes.InvalidArgument: 400, codes.FailedPrecondition: 400, codes.OutOfRange: 400, codes.Unauthenticated: 401,
		codes.PermissionDenied: 403, codes.NotFound: 404, codes.AlreadyExists: 409, codes.Aborted: 409,
		codes.ResourceExhausted: 429, codes.Unimplemented: 501, codes.Unavailable: 503, codes.DeadlineExceeded: 504,
		codes.Internal: 500, codes.Unknown: 500, codes.DataLoss: 500,
	} {
		if got := httpStatusOf(code); got != want {
			t.Errorf("httpStatusOf(%s) = %d, want %d", code, got, want)
		}
	}
	for code, want := range map[codes.Code]string{codes.Unavailable: "UNAVAILABLE", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		codes.Canceled: "CANCELLED", codes.DataLoss: "DATA_LOSS"} {
		if got := grpcCodeName(code); got != want {
			t.Errorf("grpcCodeName(%s) = %s, want %s", code, got, want)
		}
	}
}
