package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAdvertiseAddr(t *testing.T) {
	env := func(ip string) func(string) string {
		return func(k string) string {
			if k == PodIPEnv {
				return ip
			}
			return ""
		}
	}
	host := func() (string, error) { return "agg-0", nil }
	noHost := func() (string, error) { return "", errors.New("no name") }
	for _, c := range []struct {
		a    Aggregator
		ip   string
		host func() (string, error)
		want string
	}{
		{Aggregator{Listen: ":9090", AdvertiseAddress: "agg.example:9090"}, "10.0.0.5", host, "agg.example:9090"},
		{Aggregator{Listen: ":9090"}, "10.0.0.5", host, "10.0.0.5:9090"},
		{Aggregator{Listen: "0.0.0.0:9090"}, "fd00::5", host, "[fd00::5]:9090"},
		{Aggregator{Listen: "127.0.0.1:9090"}, "", host, "127.0.0.1:9090"},
		{Aggregator{Listen: "[::]:9090"}, "", host, "agg-0:9090"},
		{Aggregator{Listen: ":9090"}, "", host, "agg-0:9090"},
	} {
		got, err := c.a.AdvertiseAddr(env(c.ip), c.host)
		if err != nil || got != c.want {
			t.Errorf("%+v with POD_IP %q: %q, %v; want %q", c.a, c.ip, got, err, c.want)
		}
	}
	if _, err := (Aggregator{Listen: ":9090"}).AdvertiseAddr(env(""), noHost); err == nil {
		t.Error("no address and no host name: no error")
	}
	if _, err := (Aggregator{Listen: "nonsense"}).AdvertiseAddr(env(""), host); err == nil {
		t.Error("a listen address without a port: no error")
	}
}

func TestValidatePeers(t *testing.T) {
	for _, c := range []struct {
		a    Aggregator
		want string
	}{
		{Aggregator{}, ""},
		{Aggregator{Peers: AggregatorPeers{DNS: "agg-headless:9090", Token: "t"}}, ""},
		{Aggregator{Peers: AggregatorPeers{Addresses: []string{"10.0.0.1:9090"}, Token: "t"}}, ""},
		{Aggregator{Peers: AggregatorPeers{Addresses: []string{"10.0.0.1:9090"}}}, "peers.token is required"},
		{Aggregator{Peers: AggregatorPeers{DNS: "agg-headless", Token: "t"}}, "aggregator.peers.dns: want name:port"},
		{Aggregator{Peers: AggregatorPeers{Addresses: []string{"10.0.0.1"}, Token: "t"}}, "aggregator.peers.addresses[0]: want host:port"},
		{Aggregator{AdvertiseAddress: "x", Peers: AggregatorPeers{DNS: "a:1", Token: "t"}}, "advertiseAddress"},
	} {
		err := c.a.ValidatePeers()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.a, err, c.want)
		}
	}
}

// TestAggregatorDefaultsAtLoad: a loaded section gets every documented
// default (docs/configuration.md) from WithDefaults, which the aggregator
// applies to each configuration it loads; the defaults still validate,
// and the loaded configuration itself is left as written.
func TestAggregatorDefaultsAtLoad(t *testing.T) {
	c, err := Parse([]byte(`
aggregator:
  listen: 127.0.0.1:9090
  backends:
    - name: plain
      url: http://127.0.0.1:9101/mcp
    - name: exchanged
      url: https://mcp.example.com/mcp
      auth: {mode: tokenExchange, audience: mcp, tokenEndpoint: "https://idp.example/token", clientID: agg, clientSecret: "${SECRET}"}
    - name: service
      url: https://mcp.example.com/other
      protocol: 2025-11-25
      timeout: 5s
      auth: {mode: clientCredentials, tokenEndpoint: "https://idp.example/token", clientID: agg, clientSecret: "${SECRET}"}
`), env(map[string]string{"SECRET": "s"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ValidateAggregator(); err != nil {
		t.Fatal(err)
	}
	a := c.Aggregator.WithDefaults()
	sec := time.Second
	if a.PageSize != 1000 || a.MaxPageSize != 1000 || a.CatalogTTL.Or(0) != 30*sec || a.FanOut != 10 || a.ShutdownGrace.Or(0) != 10*sec {
		t.Errorf("section defaults: pageSize %d, maxPageSize %d, catalogTTL %v, fanOut %d, shutdownGrace %v", a.PageSize, a.MaxPageSize, a.CatalogTTL.Or(0), a.FanOut, a.ShutdownGrace.Or(0))
	}
	if h := a.Health; h.Interval.Or(0) != 10*sec || h.Timeout.Or(0) != 5*sec || h.DegradedThreshold.Or(0) != 2*sec || h.UnhealthyThreshold != 3 {
		t.Errorf("health defaults: %+v", h)
	}
	if cr := a.ConflictResolution; cr.Strategy != "prefix" || cr.PrefixFormat != "{backend}_" {
		t.Errorf("conflictResolution defaults: %+v", cr)
	}
	for i, want := range []struct {
		protocol string
		timeout  time.Duration
		cache    int
		refresh  time.Duration
	}{
		{"auto", 30 * sec, 0, 0},
		{"auto", 30 * sec, 10000, 30 * sec},
		{"2025-11-25", 5 * sec, 0, 30 * sec},
	} {
		b := a.Backends[i]
		if b.Protocol != want.protocol || b.Timeout.Or(0) != want.timeout || b.InputWait.Or(0) != 60*sec || b.Auth.CacheEntries != want.cache || b.Auth.RefreshBefore.Or(0) != want.refresh {
			t.Errorf("backends[%d] with defaults: %+v", i, b)
		}
	}
	if b := c.Aggregator.Backends[0]; b.Protocol != "" || b.Timeout != 0 || c.Aggregator.PageSize != 0 {
		t.Errorf("WithDefaults changed the loaded configuration: %+v", c.Aggregator)
	}
	withDefaults := *c
	withDefaults.Aggregator = a
	if err := withDefaults.ValidateAggregator(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}

	// maxPageSize defaults to the larger of pageSize and 1000, and
	// pageSize is brought down to maxPageSize.
	for _, p := range []struct{ page, max, wantPage, wantMax int }{{5000, 0, 5000, 5000}, {500, 0, 500, 1000}, {5000, 2000, 2000, 2000}, {0, 200, 200, 200}} {
		got := Aggregator{PageSize: p.page, MaxPageSize: p.max}.WithDefaults()
		if got.PageSize != p.wantPage || got.MaxPageSize != p.wantMax {
			t.Errorf("pageSize %d, maxPageSize %d: got %d, %d; want %d, %d", p.page, p.max, got.PageSize, got.MaxPageSize, p.wantPage, p.wantMax)
		}
	}
}

// TestAggregatorValidationNamesKeys: every rule of the aggregator's
// section is checked by ValidateAggregator, whose message names the key
// and never quotes a value that may be a secret.
func TestAggregatorValidationNamesKeys(t *testing.T) {
	const secret = "s3cr3t-t0ken"
	valid := func() *Config {
		return &Config{Aggregator: Aggregator{Listen: "127.0.0.1:9090", Backends: []Backend{
			{Name: "a", URL: "http://127.0.0.1:9101/mcp"},
			{Name: "b", URL: "https://mcp.example.com/mcp?key=" + secret, Headers: map[string]string{"X-Key": secret}},
		}}}
	}
	if err := valid().ValidateAggregator(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key    string
		change func(*Config)
	}{
		{"aggregator.listen is required", func(c *Config) { c.Aggregator.Listen = "" }},
		{"aggregator.backends[1].name is required", func(c *Config) { c.Aggregator.Backends[1].Name = "" }},
		{"aggregator.backends[1].name: also aggregator.backends[0]'s", func(c *Config) { c.Aggregator.Backends[1].Name = "a" }},
		{"aggregator.backends[1].url: must be an absolute http(s) URL", func(c *Config) { c.Aggregator.Backends[1].URL = "/mcp?key=" + secret }},
		{"aggregator.backends[1].url: must be an absolute http(s) URL", func(c *Config) { c.Aggregator.Backends[1].URL = "ftp://" + secret + "@x/mcp" }},
		{"aggregator.backends[0].url: must be an absolute http(s) URL", func(c *Config) { c.Aggregator.Backends[0].URL = "" }},
		{"aggregator.backends[0].protocol: want auto, 2026-07-28 or 2025-11-25", func(c *Config) { c.Aggregator.Backends[0].Protocol = "2024-11-05" }},
		{"aggregator.backends[1].headers: a header name", func(c *Config) {
			c.Aggregator.Backends[1].Headers = map[string]string{"Authorization: Bearer " + secret: ""}
		}},
		{"aggregator.backends[0].auth.mode", func(c *Config) { c.Aggregator.Backends[0].Auth.Mode = "bogus" }},
		{"aggregator.backends[0].auth.mode passthrough was removed", func(c *Config) { c.Aggregator.Backends[0].Auth.Mode = BackendAuthPassthrough }},
		{"aggregator.backends[1].auth: mode clientCredentials sets Authorization", func(c *Config) {
			c.Aggregator.Backends[1].Auth = BackendAuth{Mode: BackendAuthClientCredentials, TokenEndpoint: "https://idp.example/token", ClientID: "agg", ClientSecret: "s"}
			c.Aggregator.Backends[1].Headers = map[string]string{"authorization": "Bearer " + secret}
		}},
		{"aggregator.backends[1].auth: clientID and clientSecret", func(c *Config) {
			c.Aggregator.Backends[1].Auth = BackendAuth{Mode: BackendAuthClientCredentials, TokenEndpoint: "https://idp.example/token?" + secret, ClientID: "agg"}
		}},
		{"aggregator.conflictResolution.strategy: want prefix, priority or manual", func(c *Config) { c.Aggregator.ConflictResolution.Strategy = "alphabetical" }},
		{"aggregator.conflictResolution.prefixFormat: must contain {backend}", func(c *Config) { c.Aggregator.ConflictResolution.PrefixFormat = "x_" }},
		{"aggregator.conflictResolution.priorityOrder must list at least one backend", func(c *Config) { c.Aggregator.ConflictResolution.Strategy = StrategyPriority }},
		{"aggregator.conflictResolution.priorityOrder[1]: names a backend listed before it", func(c *Config) {
			c.Aggregator.ConflictResolution = ConflictResolution{Strategy: StrategyPriority, PriorityOrder: []string{"a", "a"}}
		}},
		{"aggregator.conflictResolution.overrides", func(c *Config) {
			c.Aggregator.ConflictResolution = ConflictResolution{Strategy: StrategyManual, Overrides: map[string]string{"a.create": ""}}
		}},
		{"servers[0].backends[0]: is not in aggregator.backends", func(c *Config) { c.Servers = []Server{{Name: "s", Backends: []string{"nope"}}} }},
		{"aggregator.pinning.mode", func(c *Config) { c.Aggregator.Pinning.Mode = "strict" }},
		{"aggregator.pinning.indexer.address is required", func(c *Config) { c.Aggregator.Pinning.Mode = PinningPin }},
		{"aggregator.peers.token is required", func(c *Config) { c.Aggregator.Peers.DNS = "agg-headless:9090" }},
		{"aggregator.backends[0].command: and url are two kinds of backend", func(c *Config) { c.Aggregator.Backends[0].Command = []string{"npx", secret} }},
		{"aggregator.backends[0].command: is required with env or dir", func(c *Config) {
			c.Aggregator.Backends[0].URL, c.Aggregator.Backends[0].Env = "", map[string]string{"TOKEN": secret}
		}},
		{"aggregator.backends[0].env: a variable name", func(c *Config) {
			c.Aggregator.Backends[0] = Backend{Name: "a", Command: []string{"npx"}, Env: map[string]string{"BAD NAME": secret}}
		}},
		{"aggregator.backends[0].headers: are HTTP's", func(c *Config) {
			c.Aggregator.Backends[0] = Backend{Name: "a", Command: []string{"npx"}, Headers: map[string]string{"X": secret}}
		}},
		{"aggregator.backends[0].protocol: 2026-07-28 is not spoken over stdio", func(c *Config) {
			c.Aggregator.Backends[0] = Backend{Name: "a", Command: []string{"npx"}, Protocol: ProtocolModern}
		}},
		{"aggregator.toolOverrides[0].taskSupport: is not one of", func(c *Config) {
			c.Aggregator.ToolOverrides = []ToolOverride{{Backend: "a", Tool: "t", TaskSupport: "always"}}
		}},
		{"aggregator.toolOverrides[0].ui.resourceUri: must be a ui:// URI", func(c *Config) {
			c.Aggregator.ToolOverrides = []ToolOverride{{Backend: "a", Tool: "t", UI: &UIOverride{ResourceURI: "https://x/" + secret}}}
		}},
		{"aggregator.toolOverrides[0].ui.visibility: lists something other than model and app", func(c *Config) {
			c.Aggregator.ToolOverrides = []ToolOverride{{Backend: "a", Tool: "t", UI: &UIOverride{Visibility: []string{"everyone"}}}}
		}},
		{"aggregator.toolOverrides[0].ui: removes the app and changes it", func(c *Config) {
			c.Aggregator.ToolOverrides = []ToolOverride{{Backend: "a", Tool: "t", UI: &UIOverride{Remove: true, Visibility: []string{"app"}}}}
		}},
		{"aggregator.indexer: (address and token) is required when a toolOverrides entry sets taskSupport", func(c *Config) {
			c.Servers = []Server{{Name: "s", ToolOverrides: []ToolOverride{{Backend: "a", Tool: "t", TaskSupport: TaskSupportRequired}}}}
		}},
		{"aggregator.tasks.defaultTTL: must be positive and at most maxTTL", func(c *Config) {
			c.Aggregator.Tasks = Tasks{DefaultTTL: Duration(2 * time.Hour), MaxTTL: Duration(time.Hour)}
		}},
		{"aggregator.codeMode.maxMemory: must be between", func(c *Config) { c.Aggregator.CodeMode.MaxMemory = 1 << 10 }},
		{"aggregator.codeMode.timeout: must be positive", func(c *Config) { c.Aggregator.CodeMode.Timeout = Duration(time.Hour) }},
		{"aggregator.codeMode.maxCalls: must be between", func(c *Config) { c.Aggregator.CodeMode.MaxCalls = 20_000 }},
		{"aggregator.tasks.maxTTL: is over", func(c *Config) { c.Aggregator.Tasks.MaxTTL = Duration(30 * 24 * time.Hour) }},
		{"aggregator.tasks.pollInterval: must be between", func(c *Config) { c.Aggregator.Tasks.PollInterval = Duration(time.Millisecond) }},
		{"aggregator.tasks.maxResultBytes: must be between", func(c *Config) { c.Aggregator.Tasks.MaxResultBytes = 64 << 20 }},
		{"aggregator.tasks.maxTasks: must be at least maxPerPrincipal", func(c *Config) { c.Aggregator.Tasks = Tasks{MaxPerPrincipal: 10, MaxTasks: 5} }},
	} {
		cfg := valid()
		c.change(cfg)
		err := cfg.ValidateAggregator()
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("want an error naming %q, got %v", c.key, err)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the message quotes a value: %v", c.key, err)
		}
	}
}

// A backend's share of held calls per principal defaults to 64 and is
// refused past the backend's bound, naming its key.
func TestBackendHeldPerPrincipal(t *testing.T) {
	b := Backend{Name: "b", URL: "http://127.0.0.1:1/mcp"}.WithDefaults()
	if b.HeldPerPrincipal != DefaultHeldPerPrincipal {
		t.Fatalf("default %d, want %d", b.HeldPerPrincipal, DefaultHeldPerPrincipal)
	}
	b.HeldPerPrincipal = MaxHeldCalls + 1
	if err := b.Validate("aggregator.backends[0]"); err == nil || !strings.Contains(err.Error(), "aggregator.backends[0].heldPerPrincipal") {
		t.Fatalf("a share over the bound: %v", err)
	}
}

// A backend that receives OAuth access tokens (tokenExchange,
// clientCredentials) is reached over https, or http to a loopback
// address, as its token endpoint is; static headers keep any http URL.
func TestBackendReceivingTokensNeedsHTTPS(t *testing.T) {
	oauth := BackendAuth{Mode: BackendAuthClientCredentials, TokenEndpoint: "https://idp.example/token", ClientID: "agg", ClientSecret: "s"}
	for _, tc := range []struct {
		url  string
		auth BackendAuth
		ok   bool
	}{
		{"http://tickets.internal/mcp", BackendAuth{}, true},
		{"http://tickets.internal/mcp", oauth, false},
		{"https://tickets.internal/mcp", oauth, true},
		{"http://127.0.0.1:9000/mcp", oauth, true},
	} {
		err := Backend{Name: "t", URL: tc.url, Auth: tc.auth}.Validate("aggregator.backends[0]")
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "aggregator.backends[0].url")) {
			t.Errorf("%s with mode %q: %v", tc.url, tc.auth.Mode, err)
		}
	}
}

// TestNamesInNamingAndLimitsAreKnown: a backend or server named in
// conflictResolution or in a rate limit's match but declared nowhere was
// taken: a misspelt trusted backend lost every name conflict, a
// misspelt limit counted nothing. Such a name is refused, by its key; a
// glob may match none.
func TestNamesInNamingAndLimitsAreKnown(t *testing.T) {
	base := func() *Config {
		return &Config{
			Aggregator: Aggregator{Listen: "127.0.0.1:9090", Indexer: Endpoint{Address: "127.0.0.1:9300", Token: "t"},
				Backends: []Backend{{Name: "weather", URL: "http://127.0.0.1:9101/mcp"}}},
			Servers: []Server{{Name: "forecast", Backends: []string{"weather"}}},
		}
	}
	limit := func(m RateLimitMatch) RateLimits {
		return RateLimits{Limits: []RateLimit{{Name: "l", Per: RatePerPrincipal, Rate: "1/s", Burst: 1, Match: m}}}
	}
	for _, c := range []struct {
		key    string
		change func(*Config)
	}{
		{"aggregator.conflictResolution.priorityOrder[0]", func(c *Config) {
			c.Aggregator.ConflictResolution = ConflictResolution{Strategy: StrategyPriority, PriorityOrder: []string{"weathr"}}
		}},
		{"aggregator.conflictResolution.overrides.weathr.forecast", func(c *Config) {
			c.Aggregator.ConflictResolution = ConflictResolution{Strategy: StrategyManual, Overrides: map[string]string{"weathr.forecast": "f"}}
		}},
		{"rateLimits.limits[0].match.backends[0]", func(c *Config) { c.RateLimits = limit(RateLimitMatch{Backends: []string{"weathr"}}) }},
		{"rateLimits.limits[0].match.servers[0]", func(c *Config) { c.RateLimits = limit(RateLimitMatch{Servers: []string{"forcast"}}) }},
	} {
		cfg := base()
		c.change(cfg)
		if err := cfg.ValidateAggregator(); err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s misspelt: %v, want it refused by key", c.key, err)
		}
	}
	cfg := base()
	cfg.Aggregator.ConflictResolution = ConflictResolution{Strategy: StrategyPriority, PriorityOrder: []string{"weather"}}
	cfg.RateLimits = limit(RateLimitMatch{Backends: []string{"weather", "team-*"}, Servers: []string{"forecast", "?"}})
	if err := cfg.ValidateAggregator(); err != nil {
		t.Errorf("known names and globs: %v", err)
	}
}
