package config

import (
	"strings"
	"testing"
)

// secretValue is what a ${VAR} expands to in the tests below: an error
// about the key it lands in must not show it, nor its start (yaml quotes
// the first seven bytes of a long value).
const secretValue = "s3cr3t-VALUE-xyz"

// gatewayBase is a gateway section the validation accepts, under which a
// case adds keys.
const gatewayBase = "gateway:\n  aggregator: {address: \"127.0.0.1:1\"}\n"

// TestErrorsNameKeysNotValues puts a value from ${VAR} into each kind of
// field, where the value is refused either by the YAML decoding (a typed
// field) or by the validation (an enum, a rate, a URL, an address, a
// bound): the error names the key and the variable, never the value.
func TestErrorsNameKeysNotValues(t *testing.T) {
	for _, c := range []struct {
		name     string
		yaml     string
		value    string // the variable's value (default secretValue)
		validate func(*Config) error
		key      string
	}{
		// Refused while decoding.
		{"duration", "reload: {interval: \"${V}\"}\n", "", (*Config).ValidateGateway, "reload.interval"},
		{"duration in a list", "aggregator:\n  listen: \":1\"\n  backends:\n  - {name: a, url: \"http://a\"}\n  - name: b\n    url: \"http://b\"\n    timeout: ${V}\n", "", (*Config).ValidateAggregator, "aggregator.backends[1].timeout"},
		{"duration in a flow mapping", "grpc: {keepaliveTime: 30s, maxConnectionAge: \"x${V}\"}\n", "", (*Config).ValidateGateway, "grpc.maxConnectionAge"},
		{"number", gatewayBase + "  http:\n    maxBodyBytes: ${V}\n", "", (*Config).ValidateGateway, "gateway.http.maxBodyBytes"},
		{"bool", "ops:\n  pprof: ${V}\n", "", (*Config).ValidateGateway, "ops.pprof"},
		{"float", "telemetry: {sampleRatio: \"${V}\"}\n", "", (*Config).ValidateGateway, "telemetry.sampleRatio"},
		{"list of numbers", gatewayBase + "  http:\n    maxBodyBytes: [\"${V}\"]\n", "", (*Config).ValidateGateway, "gateway.http.maxBodyBytes"},

		// Refused by the validation.
		{"gateway mode", gatewayBase + "  auth: {mode: \"${V}\"}\n", "", (*Config).ValidateGateway, "gateway.auth.mode"},
		{"backend auth mode", "aggregator:\n  listen: \":1\"\n  backends:\n  - {name: a, url: \"http://a\"}\n  - {name: b, url: \"http://b\", auth: {mode: \"${V}\"}}\n", "", (*Config).ValidateAggregator, "aggregator.backends[1].auth.mode"},
		{"pinning mode", "aggregator: {listen: \":1\", pinning: {mode: \"${V}\"}}\n", "", (*Config).ValidateAggregator, "aggregator.pinning.mode"},
		{"audit sink", "audit: {sink: \"${V}\"}\n", "", (*Config).ValidateGateway, "audit.sink"},
		{"rate", "rateLimits:\n  limits:\n  - {name: calls, per: principal, rate: \"${V}/s\"}\n", "", (*Config).ValidateIndexer, "rateLimits.limits[0].rate"},
		{"rate out of range", "rateLimits:\n  limits:\n  - {name: calls, per: principal, rate: \"${V}/s\"}\n", "98765432101", (*Config).ValidateIndexer, "rateLimits.limits[0].rate"},
		{"rate per", "rateLimits:\n  limits:\n  - {name: calls, per: \"${V}\", rate: 1/s}\n", "", (*Config).ValidateIndexer, "rateLimits.limits[0].per"},
		{"backend URL", "aggregator:\n  listen: \":1\"\n  backends:\n  - {name: a, url: \"https://user:${V}@%zz\"}\n", "", (*Config).ValidateAggregator, "aggregator.backends[0].url"},
		{"public URL", gatewayBase + "  publicURL: \"https://user:${V}@%zz\"\n", "", (*Config).ValidateGateway, "gateway.publicURL"},
		{"token endpoint", "aggregator:\n  listen: \":1\"\n  backends:\n  - name: a\n    url: \"http://a\"\n    auth: {mode: clientCredentials, clientID: c, clientSecret: s, tokenEndpoint: \"http://${V}.example/token\"}\n", "", (*Config).ValidateAggregator, "aggregator.backends[0].auth.tokenEndpoint"},
		{"origin", gatewayBase + "  http: {allowedOrigins: [\"https://${V}.example/path\"]}\n", "", (*Config).ValidateGateway, "gateway.http.allowedOrigins[0]"},
		{"dns address", "gateway:\n  aggregator: {address: \"dns:///${V}\"}\n", "", (*Config).ValidateGateway, "gateway.aggregator.address"},
		{"peer address", "aggregator: {listen: \":1\", peers: {token: t, addresses: [\"${V}\"]}}\n", "", (*Config).ValidateAggregator, "aggregator.peers.addresses[0]"},
		{"bounded number", "audit: {queueSize: \"${V}\"}\n", "98765432101", (*Config).ValidateGateway, "audit.queueSize"},
		{"bounded duration", "reload: {interval: \"${V}\"}\n", "7ms", (*Config).ValidateGateway, "reload.interval"},
		{"service credential method", "serviceAuth:\n  credentials:\n  - {name: gw, token: t, allow: [\"${V}\"]}\n", "", (*Config).ValidateIndexer, "serviceAuth.credentials[0].allow[0]"},
		{"server backend", "aggregator: {listen: \":1\", backends: [{name: a, url: \"http://a\"}]}\nservers:\n- {name: s, backends: [\"${V}\"]}\n", "", (*Config).ValidateAggregator, "servers[0].backends[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			value := c.value
			if value == "" {
				value = secretValue
			}
			lookup := func(name string) (string, bool) {
				if name == "V" {
					return value, true
				}
				return "", false
			}
			cfg, err := Parse([]byte(c.yaml), lookup)
			if err == nil {
				err = c.validate(cfg)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if strings.Contains(msg, value) || strings.Contains(msg, value[:min(len(value), 6)]) {
				t.Errorf("the error shows the value: %s", msg)
			}
			if !strings.Contains(msg, c.key) {
				t.Errorf("the error does not name %s: %s", c.key, msg)
			}
			if !strings.Contains(msg, "${V}") {
				t.Errorf("the error does not name the variable ${V}: %s", msg)
			}
		})
	}
}

// A decoding error gives the line of the file as written, not that of
// the document re-encoded after expansion.
func TestParseErrorGivesTheFilesLine(t *testing.T) {
	raw := "# a comment\n\n\nreload:\n\n  # another\n  interval: \"${V}\"\n"
	_, err := Parse([]byte(raw), func(string) (string, bool) { return "abc", true })
	if err == nil || !strings.Contains(err.Error(), "reload.interval (line 7,") {
		t.Fatalf("got %v, want reload.interval at line 7", err)
	}
}

// A value written in the file itself (no ${VAR}) is refused naming the
// key, and names no variable.
func TestErrorsWithoutVariables(t *testing.T) {
	cfg, err := Parse([]byte(gatewayBase+"  auth: {mode: bogus}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.ValidateGateway()
	if err == nil || !strings.Contains(err.Error(), "gateway.auth.mode") || strings.Contains(err.Error(), "${") || strings.Contains(err.Error(), "bogus") {
		t.Fatalf("got %v", err)
	}
}
