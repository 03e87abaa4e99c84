package wire

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// Shaping is what an era requires of a result on its way to the client.
type Shaping struct {
	Era mcpspec.Era
	// ServerInfo is the gateway's own serverInfo, set in a Modern result's
	// _meta (a Modern backend's serverInfo names the backend, not this
	// server).
	ServerInfo json.RawMessage
	// Cacheable results get ttlMs and a private cacheScope under Modern
	// (every result is filtered per principal, so a backend's "public"
	// does not hold for it); TTLms is the ttlMs advertised.
	Cacheable bool
	TTLms     int64
	// The result's own ttlMs lowers TTLms; a negative one, or one that is
	// not a number, counts as 0, as the spec has clients assume. So does
	// an absent one when FromBackend says the result is a backend's own
	// (resources/read), which an old backend may send without hints.
	FromBackend bool
	// ResultType is the result's resultType under Modern, "complete" when
	// empty; the result's own is never passed on.
	ResultType string
	// Set are members added or replaced (a sealed requestState); Drop are
	// members removed.
	Set  map[string]json.RawMessage
	Drop []string
}

// Shape reshapes the text of a result object by splicing: the members the
// era does not allow are dropped, the ones it requires are added, and every
// other member, known to go-sdk or not, is copied byte for byte. Under
// Modern the result gets resultType (ResultType, else "complete"),
// serverInfo in _meta and, when cacheable, ttlMs and cacheScope; under
// Legacy it loses those Modern-only members.
func Shape(result []byte, s Shaping) ([]byte, error) {
	ms, err := rawjson.Members(result)
	if err != nil {
		return nil, err
	}
	modern := s.Era == mcpspec.EraModern
	out := make([]byte, 0, len(result)+160)
	out = append(out, '{')
	// Keys are copied as written; the gateway's own keys are plain ASCII,
	// for which Go's quoting is JSON's.
	addRaw := func(rawKey, value []byte) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, rawKey...)
		out = append(out, ':')
		out = append(out, value...)
	}
	add := func(key string, value []byte) { addRaw(strconv.AppendQuote(nil, key), value) }
	resultType := s.ResultType
	ttl := s.TTLms
	if s.FromBackend {
		// Until the result's own ttlMs says otherwise.
		ttl = 0
	}
	var meta []byte
	for _, m := range ms {
		name := string(m.Name)
		if _, replaced := s.Set[name]; replaced || contains(s.Drop, name) {
			continue
		}
		switch name {
		case "resultType":
			// What a result is, the gateway decides (ResultType): a
			// backend's own could be one the method may not return
			// (input_required from completion/complete) or one no
			// revision defines.
			continue
		case "ttlMs":
			ttl = min(s.TTLms, backendTTL(m.Value))
			continue
		case "cacheScope":
			continue
		case "_meta":
			meta = m.Value
			continue
		}
		addRaw(m.RawName, m.Value)
	}
	for k, v := range s.Set {
		add(k, v)
	}
	if meta, err = shapeMeta(meta, modern, s.ServerInfo); err != nil {
		return nil, err
	}
	if meta != nil {
		add("_meta", meta)
	}
	if !modern {
		return append(out, '}'), nil
	}
	if resultType == "" {
		resultType = "complete"
	}
	add("resultType", strconv.AppendQuote(nil, resultType))
	if s.Cacheable {
		add("ttlMs", strconv.AppendInt(nil, ttl, 10))
		add("cacheScope", []byte(`"private"`))
	}
	return append(out, '}'), nil
}

// backendTTL reads a backend's ttlMs: a non-negative integer, or 0 for
// anything else (a negative value, a fraction rounds down, text).
func backendTTL(raw []byte) int64 {
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return max(n, 0)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || !(f >= 1) {
		return 0
	}
	return int64(min(f, math.MaxInt64/2))
}

// shapeMeta rebuilds a result's _meta: serverInfo is the gateway's under
// Modern and absent under Legacy; every other key is kept. It returns nil
// when nothing is left.
func shapeMeta(meta []byte, modern bool, serverInfo json.RawMessage) ([]byte, error) {
	var ms []rawjson.Member
	if meta != nil && string(meta) != "null" {
		var err error
		if ms, err = rawjson.Members(meta); err != nil {
			return nil, err
		}
	}
	out := []byte{'{'}
	for _, m := range ms {
		if string(m.Name) == mcpspec.MetaServerInfo {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, m.RawName...)
		out = append(out, ':')
		out = append(out, m.Value...)
	}
	if modern && serverInfo != nil {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = strconv.AppendQuote(out, mcpspec.MetaServerInfo)
		out = append(out, ':')
		out = append(out, serverInfo...)
	}
	if len(out) == 1 {
		return nil, nil
	}
	return append(out, '}'), nil
}

// EditMeta returns a copy of the object with the keys of set put in its
// _meta (replacing theirs) and the keys drop taken out of it, every other
// member and key copied byte for byte; a _meta left empty is dropped.
func EditMeta(object []byte, set map[string]json.RawMessage, drop ...string) ([]byte, error) {
	meta, ok := rawjson.Get(object, "_meta")
	if !ok || string(meta) == "null" {
		meta = []byte(`{}`)
	}
	meta, err := rawjson.MapMembers(meta, func(m rawjson.Member) ([]byte, bool) {
		return m.Value, !contains(drop, string(m.Name))
	})
	if err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if meta, err = rawjson.WithMember(meta, k, set[k]); err != nil {
			return nil, err
		}
	}
	if string(meta) == "{}" {
		return rawjson.MapMembers(object, func(m rawjson.Member) ([]byte, bool) { return m.Value, string(m.Name) != "_meta" })
	}
	return rawjson.WithMember(object, "_meta", meta)
}

// Member returns the raw value of one member of a result object, without
// decoding the rest.
func Member(result []byte, key string) (json.RawMessage, bool) {
	return rawjson.Get(result, key)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Page renders one page of a list result in the era's shape without a
// second pass: the items (definitions the aggregator rendered) are joined
// as they are, and the last page has no nextCursor member.
func Page(member string, items []json.RawMessage, next string, s Shaping) []byte {
	size := 64 + len(s.ServerInfo) + len(next)
	for _, it := range items {
		size += len(it) + 1
	}
	out := make([]byte, 0, size)
	out = append(out, '{')
	out = strconv.AppendQuote(out, member)
	out = append(out, ":["...)
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	out = append(out, ']')
	if next != "" {
		out = append(out, `,"nextCursor":`...)
		b, _ := json.Marshal(next)
		out = append(out, b...)
	}
	if s.Era == mcpspec.EraModern {
		out = append(out, `,"resultType":"complete","_meta":{`...)
		out = strconv.AppendQuote(out, mcpspec.MetaServerInfo)
		out = append(out, ':')
		out = append(out, s.ServerInfo...)
		out = append(out, '}')
		if s.Cacheable {
			out = append(out, `,"ttlMs":`...)
			out = strconv.AppendInt(out, s.TTLms, 10)
			out = append(out, `,"cacheScope":"private"`...)
		}
	}
	return append(out, '}')
}
