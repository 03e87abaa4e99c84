// Package backenderr carries a backend's own JSON-RPC error across the
// gRPC hop from the aggregator to its callers, as a typed status detail
// (aggregatorv1.BackendError) instead of strings. New builds the status the
// aggregator returns; From reads it back, in the gateway or any other
// client of the aggregator.
package backenderr

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// New returns the status error of a backend's JSON-RPC error: code
// UNKNOWN, reason ERROR_REASON_BACKEND_ERROR, and the error itself as a
// BackendError detail. msg is the status message; code, message and
// dataJSON are the backend's (dataJSON empty when it sent no data).
func New(msg string, be *aggregatorv1.BackendError) error {
	st := status.New(codes.Unknown, msg)
	info := &errdetails.ErrorInfo{Reason: commonv1.ErrorReason_ERROR_REASON_BACKEND_ERROR.String(), Domain: apierr.Domain}
	if withDetails, err := st.WithDetails(info, be); err == nil {
		st = withDetails
	}
	return st.Err()
}

// From returns the backend error carried by err, if err is a gRPC status
// with a BackendError detail.
func From(err error) (*aggregatorv1.BackendError, bool) {
	var se interface{ GRPCStatus() *status.Status }
	if err == nil || !errors.As(err, &se) {
		return nil, false
	}
	for _, d := range se.GRPCStatus().Details() {
		if be, ok := d.(*aggregatorv1.BackendError); ok {
			return be, true
		}
	}
	return nil, false
}
