package demobackend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// encodeExtensions turns the spec's extension members into JSON text,
// sorted by name so the wire is deterministic.
func encodeExtensions(ext map[string]any) ([][2][]byte, error) {
	names := make([]string, 0, len(ext))
	for n := range ext {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([][2][]byte, 0, len(names))
	for _, n := range names {
		v, err := json.Marshal(ext[n])
		if err != nil {
			return nil, fmt.Errorf("extension %q: %w", n, err)
		}
		out = append(out, [2][]byte{[]byte(n), v})
	}
	return out, nil
}

// withExtensions rewrites the answers to POSTs on the MCP endpoint so that
// listed items and tool results carry the spec's extension members. go-sdk
// cannot send members its types do not model, so they are added on the
// wire, after it: a JSON body is rewritten whole once the handler returns,
// an event stream event by event.
func (b *Backend) withExtensions(next http.Handler) http.Handler {
	if len(b.extensions) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		ew := &extensionWriter{ResponseWriter: w, ext: b.extensions}
		next.ServeHTTP(ew, r)
		ew.finish()
	})
}

// extensionWriter buffers what go-sdk writes and passes it on rewritten.
type extensionWriter struct {
	http.ResponseWriter
	ext    [][2][]byte
	stream bool // text/event-stream: rewritten per event
	wrote  bool // the header is written
	buf    []byte
}

func (w *extensionWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	// The rewritten body is longer than go-sdk computed.
	w.Header().Del("Content-Length")
	w.stream = strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream")
	w.ResponseWriter.WriteHeader(code)
}

func (w *extensionWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	w.buf = append(w.buf, p...)
	if w.stream {
		return len(p), w.writeEvents()
	}
	return len(p), nil
}

// Flush passes complete events on; a JSON body waits for finish.
func (w *extensionWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.stream {
		_ = w.writeEvents()
		if f, ok := w.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *extensionWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writeEvents writes every complete event in buf, rewritten.
func (w *extensionWriter) writeEvents() error {
	for {
		end := bytes.Index(w.buf, []byte("\n\n"))
		if end < 0 {
			return nil
		}
		event := w.buf[:end+2]
		var out []byte
		for _, line := range bytes.SplitAfter(event, []byte("\n")) {
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				line = append(append([]byte("data: "), w.rewrite(bytes.TrimSuffix(data, []byte("\n")))...), '\n')
			}
			out = append(out, line...)
		}
		w.buf = w.buf[end+2:]
		if _, err := w.ResponseWriter.Write(out); err != nil {
			return err
		}
	}
}

// finish writes a buffered JSON body, rewritten, and whatever is left.
func (w *extensionWriter) finish() {
	if len(w.buf) == 0 {
		return
	}
	if w.stream {
		_, _ = w.ResponseWriter.Write(w.buf)
		return
	}
	_, _ = w.ResponseWriter.Write(w.rewrite(bytes.TrimSpace(w.buf)))
}

// listMembers are the result members whose items get the extensions.
var listMembers = []string{"tools", "resources", "resourceTemplates", "prompts"}

// rewrite adds the extensions to one JSON-RPC message's listed items and,
// for a tool result (one with content), to the result itself. Anything it
// cannot read is passed on as it is.
func (w *extensionWriter) rewrite(msg []byte) []byte {
	result, ok := rawjson.Get(msg, "result")
	if !ok || !rawjson.StartsObject(result) {
		return msg
	}
	changed := result
	for _, m := range listMembers {
		items, ok := rawjson.Get(changed, m)
		if !ok {
			continue
		}
		var arr []byte
		if !rawjson.Elements(items, func(item []byte) bool {
			if len(arr) > 0 {
				arr = append(arr, ',')
			}
			arr = append(arr, w.extend(item)...)
			return true
		}) {
			return msg
		}
		var err error
		if changed, err = rawjson.WithMember(changed, m, append(append([]byte{'['}, arr...), ']')); err != nil {
			return msg
		}
	}
	if _, ok := rawjson.Get(changed, "content"); ok {
		changed = w.extend(changed)
	}
	out, err := rawjson.WithMember(msg, "result", changed)
	if err != nil {
		return msg
	}
	return out
}

// extend adds every extension member to the object obj.
func (w *extensionWriter) extend(obj []byte) []byte {
	for _, e := range w.ext {
		next, err := rawjson.WithMember(obj, string(e[0]), e[1])
		if err != nil {
			return obj
		}
		obj = next
	}
	return obj
}
