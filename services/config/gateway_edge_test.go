package config

import "testing"

func TestParseOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://app.example":          "https://app.example",
		"HTTPS://App.Example:443":      "https://app.example",
		"http://app.example:80":        "http://app.example",
		"http://app.example:8080":      "http://app.example:8080",
		"https://app.example:80":       "https://app.example:80",
		"http://[::1]:9000":            "http://[::1]:9000",
		"https://app.example/":         "https://app.example",
		"chrome-extension://abcdefghi": "chrome-extension://abcdefghi",
	} {
		if got, err := ParseOrigin(in); err != nil || got != want {
			t.Errorf("ParseOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "null", "app.example", "https://", "https://app.example/path", "https://app.example?q", "https://u@app.example", "https://app.example:", "*"} {
		if got, err := ParseOrigin(bad); err == nil {
			t.Errorf("ParseOrigin(%q) = %q, want an error", bad, got)
		}
	}
}

func TestValidateEdge(t *testing.T) {
	ok := Gateway{Aggregator: Endpoint{Address: "a:1"}, PublicURL: "https://mcp.example.com/prefix",
		HTTP: GatewayHTTP{AllowedOrigins: []string{"*", "https://app.example"}, AllowedHosts: []string{"gw.internal", "gw:8080"}, MaxBodyBytes: MaxBodyBytesLimit}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for name, g := range map[string]Gateway{
		"relative publicURL": {PublicURL: "mcp.example.com"},
		"publicURL scheme":   {PublicURL: "ftp://mcp.example.com"},
		"publicURL query":    {PublicURL: "https://mcp.example.com/?a=b"},
		"null origin":        {HTTP: GatewayHTTP{AllowedOrigins: []string{"null"}}},
		"origin with a path": {HTTP: GatewayHTTP{AllowedOrigins: []string{"https://app.example/x"}}},
		"empty host":         {HTTP: GatewayHTTP{AllowedHosts: []string{""}}},
		"URL as host":        {HTTP: GatewayHTTP{AllowedHosts: []string{"https://gw"}}},
		// A body the services would refuse whole every time.
		"body past a service message": {HTTP: GatewayHTTP{MaxBodyBytes: MaxBodyBytesLimit + 1}},
	} {
		g.Aggregator.Address = "a:1"
		if err := g.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// find_tool's hits are at most the indexer's bound: a larger
// optimizer.limit is taken as that bound, so that nothing built on it
// (the console's search form, whose field allows at most the bound)
// asks for more than any search answers.
func TestOptimizerLimitIsAtMostTheIndexers(t *testing.T) {
	for _, c := range []struct{ set, want int }{{0, DefaultSearchLimit}, {12, 12}, {MaxIndexerLimit, MaxIndexerLimit}, {100, MaxIndexerLimit}} {
		g := Gateway{Optimizer: Optimizer{Limit: c.set}}.WithDefaults()
		if g.Optimizer.Limit != c.want {
			t.Errorf("optimizer.limit %d became %d, want %d", c.set, g.Optimizer.Limit, c.want)
		}
	}
}
