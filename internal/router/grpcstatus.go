package router

import (
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
)

// grpcHTTP pairs gRPC status codes with HTTP statuses, as gRPC's HTTP mapping does: a code's
// status is that of its first pair, a status's code that of its first pair.
var grpcHTTP = []struct {
	code   codes.Code
	status int
}{
	{codes.OK, http.StatusOK},
	{codes.InvalidArgument, http.StatusBadRequest},
	{codes.FailedPrecondition, http.StatusBadRequest},
	{codes.OutOfRange, http.StatusBadRequest},
	{codes.Unauthenticated, http.StatusUnauthorized},
	{codes.PermissionDenied, http.StatusForbidden},
	{codes.NotFound, http.StatusNotFound},
	{codes.Aborted, http.StatusConflict},
	{codes.AlreadyExists, http.StatusConflict},
	{codes.ResourceExhausted, http.StatusTooManyRequests},
	{codes.Canceled, statusClientClosedRequest},
	{codes.Unimplemented, http.StatusNotImplemented},
	{codes.Unavailable, http.StatusServiceUnavailable},
	{codes.DeadlineExceeded, http.StatusGatewayTimeout},
	{codes.InvalidArgument, http.StatusRequestTimeout},
	{codes.ResourceExhausted, http.StatusRequestEntityTooLarge},
}

// httpStatusOf is the HTTP status of a gRPC status code: 500 for a code without a pair
// (Internal, Unknown, DataLoss).
func httpStatusOf(c codes.Code) int {
	for _, p := range grpcHTTP {
		if p.code == c {
			return p.status
		}
	}
	return http.StatusInternalServerError
}

// grpcCodeOf is the gRPC status code of an HTTP status the router answers: FailedPrecondition
// for another 4xx, Internal for another 5xx.
func grpcCodeOf(status int) codes.Code {
	for _, p := range grpcHTTP {
		if p.status == status {
			return p.code
		}
	}
	if status >= 400 && status < 500 {
		return codes.FailedPrecondition
	}
	return codes.Internal
}

// grpcCodeName is a gRPC status code as the protocol writes it (UNAVAILABLE, CANCELLED).
func grpcCodeName(c codes.Code) string {
	if c == codes.Canceled {
		return "CANCELLED"
	}
	var b strings.Builder
	for i, ch := range c.String() {
		if i > 0 && ch >= 'A' && ch <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(ch)
	}
	return strings.ToUpper(b.String())
}
