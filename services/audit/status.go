package audit

import "google.golang.org/grpc/codes"

// Outcomer is an error that says its own outcome: a rate limit's
// refusal (OutcomeRateLimited) makes itself known to the trail by this
// one method, wherever it is returned from.
type Outcomer interface {
	error
	AuditOutcome() Outcome
}

// OutcomeOfCode is the outcome of a request that failed with a gRPC
// status code, for a service that sees only the status (the indexer's
// find_tool, the gateway): a rate limit's RESOURCE_EXHAUSTED is
// rate_limited.
func OutcomeOfCode(c codes.Code) Outcome {
	switch c {
	case codes.OK:
		return OutcomeOK
	case codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition:
		return OutcomeInvalid
	case codes.NotFound:
		return OutcomeNotFound
	case codes.PermissionDenied, codes.Unauthenticated:
		return OutcomeDenied
	case codes.ResourceExhausted:
		return OutcomeRateLimited
	case codes.DeadlineExceeded:
		return OutcomeTimeout
	case codes.Canceled:
		return OutcomeCancelled
	case codes.Unavailable:
		return OutcomeBackendError
	default:
		return OutcomeError
	}
}
