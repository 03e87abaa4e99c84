package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shortConfig is the whole single-machine configuration that
// docs/configuration.md shows under "A short configuration".
func shortConfig(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## A short configuration\n")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/configuration.md has no yaml block under \"A short configuration\"")
	}
	return block
}

// TestShortConfiguration: the short file is every service's valid
// configuration, with loopback addresses and the endpoints its roles make
// plain; an address or token it names is kept.
func TestShortConfiguration(t *testing.T) {
	shortConfig := shortConfig(t)
	if n := strings.Count(shortConfig, "\n"); n > 16 {
		t.Fatalf("the short configuration is %d lines", n)
	}
	env := map[string]string{"GW": "gw-token", "IDX": "idx-token", "AGG": "agg-token", "ALICE_KEY": "alice-key-0123456789"}
	c, err := Parse([]byte(shortConfig), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{c.ValidateGateway(), c.ValidateAggregator(), c.ValidateIndexer()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for what, got := range map[string][2]string{
		"gateway.aggregator":  {c.Gateway.Aggregator.Address + " " + c.Gateway.Aggregator.Token, DefaultAggregatorListen + " gw-token"},
		"gateway.indexer":     {c.Gateway.Indexer.Address + " " + c.Gateway.Indexer.Token, DefaultIndexerListen + " gw-token"},
		"indexer.aggregator":  {c.Indexer.Aggregator.Address + " " + c.Indexer.Aggregator.Token, DefaultAggregatorListen + " idx-token"},
		"aggregator.indexer":  {c.Aggregator.Indexer.Address + " " + c.Aggregator.Indexer.Token, DefaultIndexerListen + " agg-token"},
		"the gateway listens": {c.Gateway.WithDefaults().Listen, DefaultGatewayListen},
	} {
		if got[0] != got[1] {
			t.Errorf("%s: %q, want %q", what, got[0], got[1])
		}
	}

	named, err := Parse([]byte(shortConfig+"  aggregator: {address: \"10.0.0.9:9090\", token: own}\n"), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if named.Indexer.Aggregator.Address != "10.0.0.9:9090" || named.Indexer.Aggregator.Token != "own" {
		t.Fatalf("a named endpoint was replaced: %+v", named.Indexer.Aggregator)
	}
	// Two credentials of one role: no token is guessed.
	two, err := Parse([]byte(strings.Replace(shortConfig, "    - {name: indexer,", "    - {name: gateway-next, token: other, role: gateway}\n    - {name: indexer,", 1)),
		func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if two.Gateway.Aggregator != (Endpoint{}) {
		t.Fatalf("an endpoint made from one of two gateway credentials: %+v", two.Gateway.Aggregator)
	}
}
