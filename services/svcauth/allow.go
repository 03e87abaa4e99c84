package svcauth

import (
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// Each credential names the RPCs it may call (serviceAuth.credentials[].allow,
// read into a config.MethodSet), so a credential that leaks, or a service
// that is compromised, reaches only what its owner needs: the indexer's
// credential reads views but cannot call a tool as anyone
// (config.IndexerMethods), an internal client gets the methods it was
// given. A call of any other method is refused after authentication and
// before the handler, with PERMISSION_DENIED (ERROR_REASON_METHOD_NOT_ALLOWED).

func errMethodNotAllowed(fullMethod string) error {
	return apierr.New(codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED,
		"this service credential may not call "+strings.TrimPrefix(fullMethod, "/"))
}
