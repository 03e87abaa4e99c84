package svcauth

import (
	"fmt"
	"slices"
	"strings"

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

// CheckPrincipal refuses a principal past its bounds, or whose subject or
// a group holds a control character: caches, buckets and held calls are
// keyed by them, and no identity provider names anyone with a NUL. The
// gateway applies it to the principals it authenticates, every service
// to those a request names.
func CheckPrincipal(p *commonv1.Principal) error {
	if hasControl(p.GetSubject()) || slices.ContainsFunc(p.GetGroups(), hasControl) {
		return apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT,
			"the principal's subject or a group holds a control character")
	}
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

// hasControl reports whether s holds an ASCII control character.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
