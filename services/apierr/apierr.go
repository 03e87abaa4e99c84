// Package apierr builds and reads the gRPC statuses Switchboard services
// return. Every non-OK status carries a google.rpc.ErrorInfo detail with a
// commonv1.ErrorReason, so clients (the gateway above all) branch on a
// machine-readable reason instead of parsing messages.
package apierr

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// Domain is the ErrorInfo domain of Switchboard errors.
const Domain = "switchboard.dev"

// New returns a status error with code, reason and a client-safe message.
// The message must not contain internal detail: it reaches MCP clients.
func New(code codes.Code, reason commonv1.ErrorReason, msg string, metadata ...string) error {
	st := status.New(code, msg)
	info := &errdetails.ErrorInfo{Reason: reason.String(), Domain: Domain}
	if len(metadata) > 1 {
		info.Metadata = map[string]string{}
		for i := 0; i+1 < len(metadata); i += 2 {
			info.Metadata[metadata[i]] = metadata[i+1]
		}
	}
	if withDetail, err := st.WithDetails(info); err == nil {
		st = withDetail
	}
	return st.Err()
}

// Reason extracts the ErrorReason of a status error, or UNSPECIFIED.
func Reason(err error) commonv1.ErrorReason {
	r, _ := Info(err)
	return r
}

// Info extracts the reason and metadata of a status error.
func Info(err error) (commonv1.ErrorReason, map[string]string) {
	var se interface{ GRPCStatus() *status.Status }
	if err == nil || !errors.As(err, &se) {
		return commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, nil
	}
	for _, d := range se.GRPCStatus().Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == Domain {
			if v, ok := commonv1.ErrorReason_value[info.GetReason()]; ok {
				return commonv1.ErrorReason(v), info.GetMetadata()
			}
		}
	}
	return commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, nil
}
