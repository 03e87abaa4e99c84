package demobackend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

// MCPPath is where the backend serves MCP.
const MCPPath = "/mcp"

// modernVersion is the first protocol revision of the stateless era; the
// SDK too compares versions as strings against it.
const modernVersion = "2026-07-28"

// maxAdminBody bounds a POST /admin/tools body.
const maxAdminBody = 1 << 20

// Handler serves the backend:
//
//	/mcp                  MCP, both eras (or Legacy only)
//	/healthz              200 "ok"
//	POST /admin/tools     add or replace a tool (a ToolSpec as JSON)
//	DELETE /admin/tools/N remove tool N
//	GET /admin/tools      the tool names, as a JSON array
//	POST /admin/resources/updated  {"uri": U}: tell U's subscribers it changed
//
// The admin endpoints are unauthenticated: they exist so tests can change
// the catalog of a running backend. Bind the backend to loopback.
func (b *Backend) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(MCPPath, b.mcpHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /admin/tools", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, b.ToolNames())
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

// mcpHandler routes each request to the stateless handler (Modern) or the
// stateful one (Legacy sessions: initialize, session traffic, GET, DELETE).
// Both serve the same *mcp.Server, so catalog changes reach both.
func (b *Backend) mcpHandler() http.Handler {
	getServer := func(*http.Request) *mcp.Server { return b.server }
	stateful := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{})
	if b.statefulOnly {
		return stateful
	}
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true,
		// A Modern client that closes its response stream cancels the call
		// (the spec's MUST); the sleep behaviour relies on it.
		PropagateRequestCancellation: true,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		modern, err := isModern(r)
		if err != nil {
			http.Error(w, "cannot read request body", http.StatusBadRequest)
			return
		}
		if modern {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
}

// isModern reports whether r is a Modern request: a POST outside a Legacy
// session whose header or body _meta declares a version of the stateless
// era. Looking at the body too means a Modern request with a missing
// header still reaches the stateless handler, which answers it with the
// spec's -32020 instead of the stateful handler's -32022.
func isModern(r *http.Request) (bool, error) {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		return false, nil
	}
	if r.Header.Get("Mcp-Protocol-Version") >= modernVersion {
		return true, nil
	}
	body, err := readBody(r, mcp.DefaultMaxRequestBodyBytes)
	if err != nil {
		return false, err
	}
	var msg struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return false, nil // not ours to judge: the handler reports bad JSON
	}
	v, _ := msg.Params.Meta[mcp.MetaKeyProtocolVersion].(string)
	return v >= modernVersion, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// An encoding error means the client went away; there is no one left
	// to tell.
	_ = json.NewEncoder(w).Encode(v)
}

// readBody reads at most limit bytes of r's body and puts them back, so the
// MCP handler can read the body again after the router peeked at it.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, err
}
