package catalog

import (
	"encoding/json"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/override"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/paramheader"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// overriddenToolItem is toolItem for a tool with an override (ov; nil for
// none): the definition as listed, rewritten by the override, then made an
// item from (read from the rewritten bytes, as toolItem reads any). A
// definition the override cannot rewrite is advertised as listed, and
// logged.
func overriddenToolItem(ov *override.Tool, t *mcp.Tool, raw []byte, name, b string, log *slog.Logger) (*aggregatorv1.Tool, []byte) {
	if ov == nil {
		return toolItem(t, raw, name, b)
	}
	if raw == nil {
		raw, _ = json.Marshal(t)
	}
	def, err := ov.Definition(raw)
	if err != nil {
		log.Warn("tool override not applied: the listed definition is not a JSON object", "backend", b, "tool", t.Name)
		return toolItem(t, raw, name, b)
	}
	if missing := ov.Undeclared(raw); len(missing) > 0 {
		log.Warn("tool override names arguments the tool's input schema does not declare; they are still sent on every call",
			"backend", b, "tool", t.Name, "arguments", missing)
	}
	return toolItem(t, def, name, b)
}

// attachOverrides gives each overridden tool its override, and its
// x-mcp-header bindings from the backend's own input schema (the item's
// advertised schema may lack a hidden argument whose header the backend
// still expects).
func attachOverrides(tools []Item[*aggregatorv1.Tool], ovs *override.Set, lists map[string]*backend.Lists) {
	byName := map[string]map[string]int{}
	for i := range tools {
		it := &tools[i]
		ov := ovs.Tool(it.Backend, it.Original)
		if ov == nil {
			continue
		}
		it.Override = ov
		l := lists[it.Backend]
		idx, ok := byName[it.Backend]
		if !ok {
			idx = make(map[string]int, len(l.Tools))
			for j, t := range l.Tools {
				if t != nil {
					if _, dup := idx[t.Name]; !dup {
						idx[t.Name] = j
					}
				}
			}
			byName[it.Backend] = idx
		}
		if j, ok := idx[it.Original]; ok {
			var raw []byte
			if j < len(l.Definitions.Tools) {
				raw = l.Definitions.Tools[j]
			}
			if raw == nil {
				raw, _ = json.Marshal(l.Tools[j])
			}
			it.ParamHeaders = paramheader.Extract(override.FieldsOf(raw).InputSchema)
		}
	}
}

// warnUnmatched logs each override that names a tool its backend does
// not list, once, when it stops matching: a name written as the catalog
// shows it ("tickets_search") rather than as the backend lists it
// ("search") overrides nothing, and an argument it meant to hide stays
// visible and settable. A backend that is down or not listed keeps what
// was known of it.
func (bd *Builder) warnUnmatched(lists map[string]*backend.Lists, down map[string]bool) {
	now := map[[2]string]bool{}
	listed := map[string]map[string]bool{}
	bd.spec.Overrides.Each(func(b, tool string) {
		k := [2]string{b, tool}
		l := lists[b]
		if l == nil || down[b] {
			now[k] = bd.unmatched[k]
			return
		}
		if listed[b] == nil {
			listed[b] = make(map[string]bool, len(l.Tools))
			for _, t := range l.Tools {
				if t != nil {
					listed[b][t.Name] = true
				}
			}
		}
		if listed[b][tool] {
			return
		}
		now[k] = true
		if !bd.unmatched[k] {
			bd.log.Warn("tool override names a tool its backend does not list; it overrides nothing (name the tool as the backend lists it; a tool quarantined by pinning is not listed either)",
				"server", bd.spec.Server, "backend", b, "tool", tool)
		}
	})
	bd.unmatched = now
}
