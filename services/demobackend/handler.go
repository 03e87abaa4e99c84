package demobackend

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/switchboard-mcp/switchboard/services/dualera"
)

// MCPPath is where the backend serves MCP.
const MCPPath = "/mcp"

// maxAdminBody bounds a POST /admin/tools body.
const maxAdminBody = 1 << 20

// Handler serves the backend:
//
//	/mcp                  MCP, both eras (or Legacy only)
//	/healthz              200 "ok"
//	POST /admin/tools     add or replace a tool (a ToolSpec as JSON)
//	DELETE /admin/tools/N remove tool N
//	GET /admin/tools      the tool names, as a JSON array
//	GET /admin/sleeps     the sleep calls running, cancelled and completed (SleepStats)
//	POST /admin/resources/updated  {"uri": U}: tell U's subscribers it changed
//	GET /admin/calls      requests that reached each handler (see Calls)
//
// The admin endpoints are unauthenticated: they exist so tests can change
// the catalog of a running backend. Bind the backend to loopback.
func (b *Backend) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(MCPPath, b.withChallenges(b.withTasks(b.withExtensions(b.mcpHandler()))))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /admin/tools", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, b.ToolNames())
	})
	mux.HandleFunc("GET /admin/calls", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, b.Calls())
	})
	mux.HandleFunc("GET /admin/sleeps", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, b.Sleeps())
	})
	mux.HandleFunc("POST /admin/tools", func(w http.ResponseWriter, r *http.Request) {
		var t ToolSpec
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be a tool as JSON: " + err.Error()})
			return
		}
		if err := b.AddTool(t); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		b.log.Info("tool added", "tool", t.Name)
		writeJSON(w, http.StatusCreated, map[string]string{"backend": b.name, "tool": t.Name})
	})
	mux.HandleFunc("DELETE /admin/tools/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if !b.RemoveTool(name) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no tool %q", name)})
			return
		}
		b.log.Info("tool removed", "tool", name)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /admin/resources/updated", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			URI string `json:"uri"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || body.URI == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": `body must be {"uri": "<resource URI>"}`})
			return
		}
		if err := b.server.ResourceUpdated(r.Context(), &mcp.ResourceUpdatedNotificationParams{URI: body.URI}); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	// Join the caller's W3C trace (the aggregator forwards it), so a
	// backend call shows up in the request's trace when spans are exported.
	return otelhttp.NewHandler(mux, "switchboard-demo-backend", otelhttp.WithSpanNameFormatter(
		func(_ string, r *http.Request) string { return "demo backend " + r.Method + " " + r.URL.Path }))
}

// mcpHandler serves both eras over the one server (dualera), so catalog
// changes reach both; with --stateful, Legacy sessions only.
func (b *Backend) mcpHandler() http.Handler {
	if b.statefulOnly {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return b.server }, &mcp.StreamableHTTPOptions{})
	}
	// A Modern client that closes its response stream cancels the call (the
	// spec's MUST); the sleep behaviour relies on it.
	return dualera.New(b.server, &mcp.StreamableHTTPOptions{PropagateRequestCancellation: true}, nil)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An encoding error means the client went away; there is no one left
	// to tell.
	_ = json.NewEncoder(w).Encode(v)
}
