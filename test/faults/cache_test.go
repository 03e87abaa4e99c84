package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// cacheBackend serves one resource, and one that asks for confirmation,
// with the given cache hints on every cacheable result.
func cacheBackend(name, hints string) harness.Backend {
	return harness.Backend{Name: name, Spec: fmt.Sprintf(`
cache: %s
tools:
  - {name: echo, behaviour: echo}
resources:
  - {uri: "%s://r", name: r, text: "r"}
  - {uri: "%s://confirm", name: confirm, text: "c", confirm: true}
`, hints, name, name)}
}

// gatewayTTL is the gateway's own cache.ttl in TestBackendCacheHints.
const gatewayTTL = 60 * time.Second

// TestBackendCacheHints reads resources through the gateway from backends
// that send various ttlMs and cacheScope hints (a backend's result is passed
// through, so its hints matter; the lists and discover are the gateway's
// own): the gateway advertises the smaller of its TTL and the backend's,
// a backend's 0 stays 0 and a negative one counts as 0, the scope is always
// private, and the result of an input retry is immediately stale.
func TestBackendCacheHints(t *testing.T) {
	c := harness.Start(t, harness.Options{NoIndexer: true, Backends: []harness.Backend{
		cacheBackend("zero", "{ttlMs: 0, scope: public}"),
		cacheBackend("short", "{ttlMs: 5000, scope: public}"),
		cacheBackend("long", "{ttlMs: 600000, scope: private}"),
		cacheBackend("negative", "{ttlMs: -5, scope: public}"),
	}, Configure: func(cfg *config.Config) {
		cfg.Logging.Level = "info"
		cfg.Gateway.Cache.TTL = config.Duration(gatewayTTL)
	}})
	own := fmt.Sprint(gatewayTTL.Milliseconds())
	for _, tc := range []struct{ uri, ttl string }{
		{"zero://r", "0"}, {"short://r", "5000"}, {"long://r", own}, {"negative://r", "0"},
	} {
		r := modernRPC(t, c.MCPURL, "resources/read", tc.uri, `"uri":`+quoted(tc.uri))
		if r.Error != nil || r.member("ttlMs") != tc.ttl || r.member("cacheScope") != `"private"` {
			t.Errorf("resources/read %s: ttlMs %s cacheScope %s (error %+v); want ttlMs %s, private", tc.uri, r.member("ttlMs"), r.member("cacheScope"), r.Error, tc.ttl)
		}
	}
	for _, method := range []string{"server/discover", "tools/list", "resources/list"} {
		r := modernRPC(t, c.MCPURL, method, "", "")
		if r.Error != nil || r.member("ttlMs") != own || r.member("cacheScope") != `"private"` {
			t.Errorf("%s: ttlMs %s cacheScope %s (error %+v); want the gateway's own %s, private", method, r.member("ttlMs"), r.member("cacheScope"), r.Error, own)
		}
	}

	// A read that needs the client's input: the input_required result has
	// no cache hints (the spec puts them on complete results only), and
	// the retry's complete result is immediately stale, whatever the
	// backend says.
	first := modernRPC(t, c.MCPURL, "resources/read", "short://confirm", `"uri":"short://confirm"`)
	state, key := inputRequired(t, "first read of short://confirm", first)
	if first.member("ttlMs") != "" || first.member("cacheScope") != "" {
		t.Errorf("first read of short://confirm: %s, want no cache hints on input_required", first)
	}
	retry := modernRPC(t, c.MCPURL, "resources/read", "short://confirm", `"uri":"short://confirm",`+accepted(key)+`,"requestState":`+quoted(state))
	if retry.Error != nil || retry.member("resultType") != `"complete"` || retry.member("ttlMs") != "0" || retry.member("cacheScope") != `"private"` {
		t.Errorf("the retry's result: %s; want a complete result with ttlMs 0, cacheScope private", retry)
	}
	checkNoCrash(t, procs(c), nil)
}
