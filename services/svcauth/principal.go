package svcauth

import (
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// Bounds of a principal a request names. Services key caches, rate-limit
// buckets and audit events by the principal, so its size is bounded where
// it enters: a request past any bound is refused (INVALID_ARGUMENT) before
// its handler runs, whoever the caller. Real identities are far smaller:
// OIDC bounds a subject at 255 ASCII characters, and a token carrying
// groups fits in an HTTP header.
const (
	// MaxSubjectBytes bounds the subject.
	MaxSubjectBytes = 1024
	// MaxGroups bounds the number of groups, repeats included.
	MaxGroups = 1024
	// MaxGroupBytes bounds each group (a directory DN is long).
	MaxGroupBytes = 1024
	// MaxGroupsBytes bounds all groups together.
	MaxGroupsBytes = 64 << 10
)

// checkBounds refuses a principal past its bounds.
func checkBounds(p *commonv1.Principal) error {
	if len(p.GetSubject()) > MaxSubjectBytes {
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
			fmt.Sprintf("the principal's subject is longer than %d bytes", MaxSubjectBytes))
	}
	groups := p.GetGroups()
	if len(groups) > MaxGroups {
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
			fmt.Sprintf("the principal has more than %d groups", MaxGroups))
	}
	total := 0
	for _, g := range groups {
		if len(g) > MaxGroupBytes {
			return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
				fmt.Sprintf("a group of the principal is longer than %d bytes", MaxGroupBytes))
		}
		total += len(g)
	}
	if total > MaxGroupsBytes {
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
			fmt.Sprintf("the principal's groups are longer than %d bytes together", MaxGroupsBytes))
	}
	return nil
}
