package backend

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveRoots makes the sessions of client answer a backend's roots/list
// with ask's answer, the roots of the caller the session acts for (a held
// call asks its client, as it does for elicitation and sampling), or,
// with ask nil, refuse it: go-sdk has no handler for roots/list and would
// answer with the aggregator's own root list, empty, which the backend
// would take for its caller's.
func serveRoots(client *mcp.Client, ask func(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error)) {
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "roots/list" {
				return next(ctx, method, req)
			}
			if ask == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "the client declared no roots"}
			}
			params, _ := req.GetParams().(*mcp.ListRootsParams)
			if params == nil {
				params = &mcp.ListRootsParams{}
			}
			res, err := ask(ctx, params)
			if err != nil {
				return nil, err
			}
			return res, nil
		}
	})
}
