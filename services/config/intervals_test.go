package config

import (
	"strings"
	"testing"
	"time"
)

// TestIntervalsHaveAFloor: periodic work has a least interval, as
// reload.interval (100ms) and grpc.keepaliveTime (10s) have: a backend
// probed, the database collected or the issuer's keys fetched every
// nanosecond is work back to back. A value under the floor is refused by
// its key; the floor itself is taken.
func TestIntervalsHaveAFloor(t *testing.T) {
	lookup := env(map[string]string{"GW": "gw-token", "IDX": "idx-token", "AGG": "agg-token", "ALICE_KEY": "alice-key-0123456789"})
	parse := func(extra string) *Config {
		c, err := Parse([]byte(shortConfig(t)+extra), lookup)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	oidc := func(c *Config, minInterval time.Duration) {
		c.Gateway.Auth = GatewayAuth{Mode: "oidc", OIDC: OIDC{Issuer: "https://idp.example", Audience: "switchboard", JWKSURL: "https://idp.example/jwks",
			JWKSRefresh: JWKSRefresh{MinInterval: Duration(minInterval)}}}
	}
	for _, k := range []struct {
		key   string
		floor time.Duration
		set   func(*Config, time.Duration)
	}{
		{"aggregator.health.interval", 100 * time.Millisecond, func(c *Config, d time.Duration) { c.Aggregator.Health.Interval = Duration(d) }},
		{"indexer.gcInterval", time.Second, func(c *Config, d time.Duration) { c.Indexer.GCInterval = Duration(d) }},
		{"gateway.auth.oidc.jwksRefresh.minInterval", 100 * time.Millisecond, oidc},
	} {
		c := parse("")
		k.set(c, time.Nanosecond)
		if err := errorsOf(c); !strings.Contains(err, k.key) {
			t.Errorf("%s: 1ns: %q, want it refused by its key", k.key, err)
		}
		c = parse("")
		k.set(c, k.floor)
		if err := errorsOf(c); err != "" {
			t.Errorf("%s: %v, the floor: %s", k.key, k.floor, err)
		}
	}
}

// errorsOf is what the three services' validations say of c, joined.
func errorsOf(c *Config) string {
	var out []string
	for _, err := range []error{c.ValidateGateway(), c.ValidateAggregator(), c.ValidateIndexer()} {
		if err != nil {
			out = append(out, err.Error())
		}
	}
	return strings.Join(out, "; ")
}
