package config

import (
	"strings"
	"testing"
)

// secretValue is what a ${VAR} expands to in the tests below: an error
// about the key it lands in must not show it, nor its start (yaml quotes
// the first seven bytes of a long value).
const secretValue = "s3cr3t-VALUE-xyz"

// trickySecrets are secrets that end or confuse the quoting of a value in
// a yaml error: backticks (yaml quotes a value as `value`, or its first
// seven bytes as `abcdefg...`), double quotes and backslashes.
var trickySecrets = []string{
	"ab`SECRETPART-xyz",
	"`SECRETPART`xyz",
	"SE`CRETPART",
	"a`b`SECRETPART",
	"S`C`R`T",
	"ab\"SECRETPART\\\"-xyz",
}

// showsValue reports whether msg shows value, or four bytes of it in a row.
func showsValue(msg, value string) bool {
	if len(value) < 4 {
		return strings.Contains(msg, value)
	}
	for i := 0; i+4 <= len(value); i++ {
		if strings.Contains(msg, value[i:i+4]) {
			return true
		}
	}
	return false
}

// gatewayBase is a gateway section the validation accepts, under which a
// case adds keys.
const gatewayBase = "gateway:\n  aggregator: {address: \"127.0.0.1:1\", token: t}\n"

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
		{"negative duration", "aggregator:\n  listen: \":1\"\n  backends:\n  - {name: a, url: \"http://a\"}\n  - name: b\n    url: \"http://b\"\n    inputWait: ${V}\n", "-5s", (*Config).ValidateAggregator, "aggregator.backends[1].inputWait"},
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
		{"body past a service message", gatewayBase + "  http:\n    maxBodyBytes: ${V}\n", "9437184", (*Config).ValidateGateway, "gateway.http.maxBodyBytes"},
		{"bounded duration", "reload: {interval: \"${V}\"}\n", "7ms", (*Config).ValidateGateway, "reload.interval"},
		{"service credential method", "serviceAuth:\n  credentials:\n  - {name: gw, token: t, allow: [\"${V}\"]}\n", "", (*Config).ValidateIndexer, "serviceAuth.credentials[0].allow[0]"},
		{"server backend", "aggregator: {listen: \":1\", backends: [{name: a, url: \"http://a\"}]}\nservers:\n- {name: s, backends: [\"${V}\"]}\n", "", (*Config).ValidateAggregator, "servers[0].backends[0]"},
		{"service credential hostedBy", "serviceAuth:\n  credentials:\n  - {name: gw, token: t, allow: [\"a.B/*\"], hostedBy: \"${V}\"}\n", "", (*Config).ValidateIndexer, "serviceAuth.credentials[0].hostedBy"},

		// Refused while decoding: an explicit tag the value does not fit.
		{"tagged int", "aggregator:\n  toolOverrides:\n  - {backend: a, tool: t, arguments: {n: {hidden: true, value: !!int \"${V}\"}}}\n", "", (*Config).ValidateAggregator, "aggregator.toolOverrides[0].arguments.n.value"},
		{"tagged bool", "ops:\n  pprof: !!bool ${V}\n", "", (*Config).ValidateGateway, "ops.pprof"},
	} {
		values := []string{c.value}
		if c.value == "" {
			values = append([]string{secretValue}, trickySecrets...)
		}
		for _, value := range values {
			t.Run(c.name+"/"+value, func(t *testing.T) {
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
				if showsValue(msg, value) {
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
}

// A value that holds the words yaml writes after it is not mistaken for
// the end of the message: the error is rebuilt from its parts.
func TestDecodeErrorIsRebuilt(t *testing.T) {
	for _, value := range []string{"Q` into Q", "` into `", "Q into Q` into Q"} {
		_, err := Parse([]byte("gateway:\n  http:\n    maxBodyBytes: ${V}\n"), env(map[string]string{"V": value}))
		const want = "parse config: gateway.http.maxBodyBytes (line 3, from ${V}): cannot unmarshal !!str into int64"
		if err == nil || err.Error() != want {
			t.Errorf("%q: got %v, want %s", value, err, want)
		}
	}
}

// The decoding errors yaml raises outside its list of type errors (an
// explicit tag the value does not fit, a key that cannot be one) show no
// value either.
func TestDecodeFailuresShowNoValue(t *testing.T) {
	for _, file := range []string{
		"aggregator:\n  toolOverrides:\n  - {backend: a, tool: t, arguments: {n: {hidden: true, value: {? [\"${V}\"] : 1}}}}\n",
		"aggregator:\n  toolOverrides:\n  - {backend: a, tool: t, arguments: {n: {hidden: true, value: !!float ${V}}}}\n",
		"gateway:\n  http:\n    maxBodyBytes: !!int ${V}\n",
	} {
		for _, value := range append([]string{secretValue}, trickySecrets...) {
			_, err := Parse([]byte(file), env(map[string]string{"V": value}))
			if err == nil {
				t.Errorf("%q with %q: accepted", file, value)
				continue
			}
			if showsValue(err.Error(), value) {
				t.Errorf("%q with %q: the error shows the value: %v", file, value, err)
			}
		}
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

// Every form of yaml's decoding messages is rebuilt from its parts or
// dropped, whatever the value it quotes holds.
func TestDecodeMessagesRebuilt(t *testing.T) {
	const s = "ab`SECRETPART-xyz"
	for msg, want := range map[string]string{
		"cannot unmarshal !!str `" + s[:7] + "...` into int64":     "cannot unmarshal !!str into int64",
		"cannot unmarshal !!str `a` into b` into bool":             "cannot unmarshal !!str into bool",
		"cannot unmarshal !!map into string":                       "cannot unmarshal !!map into string",
		"cannot unmarshal !!seq into map[string]interface {}":      "cannot unmarshal !!seq into map[string]interface {}",
		"cannot unmarshal !weird `" + s + "` into config.Duration": "cannot unmarshal a value into config.Duration",
		"cannot unmarshal !!str `" + s + "`":                       cannotDecode,
		"mapping key \"" + s + "\" already defined at line 3":      "a key given twice",
		"mapping key \"a\nb\" already defined at line 3":           "a key given twice",
		"field tokn not found in type config.Endpoint":             "field tokn not found in type config.Endpoint",
		"field token already set in type config.Endpoint":          "field token already set in type config.Endpoint",
		notADuration:                 notADuration,
		negativeDuration:             negativeDuration,
		"something else `" + s + "`": cannotDecode,
	} {
		if got := decodeProblem(msg); got != want {
			t.Errorf("%q: got %q, want %q", msg, got, want)
		}
	}
	for msg, want := range map[string]string{
		"yaml: cannot decode !!str `" + s + "` as a !!int":            "yaml: cannot decode a !!str value as a !!int",
		"yaml: cannot decode !!str `x as a !!int` as a !!bool":        "yaml: cannot decode a !!str value as a !!bool",
		"yaml: cannot decode !!str `" + s + "` as a !x":               "yaml: a value does not fit its explicit tag",
		"yaml: invalid map key: []interface {}{\"" + s + "\"}":        "yaml: invalid map key: a list or a mapping cannot be a key",
		"yaml: unknown anchor 'a' referenced":                         "yaml: unknown anchor 'a' referenced",
		"yaml: document contains excessive aliasing":                  "yaml: document contains excessive aliasing",
		"invalid IP address: " + s:                                    "yaml: the expanded file " + cannotDecode,
		"yaml: runtime error: hash of unhashable type []interface {}": "yaml: the expanded file " + cannotDecode,
	} {
		if got := decodeFailure(msg); got != want {
			t.Errorf("%q: got %q, want %q", msg, got, want)
		}
	}
}

// A list's or a map's key (a stdio server's command, its env) is refused
// with the line of its first value: the file's line of it, as a scalar's.
func TestErrorsOnListsGiveTheirLine(t *testing.T) {
	raw := "aggregator:\n  backends:\n    - name: local\n      url: http://x/mcp\n      command:\n        - server\n"
	cfg, err := Parse([]byte(raw), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.ValidateAggregator()
	if err == nil || !strings.Contains(err.Error(), "aggregator.backends[0].command (line 6)") {
		t.Fatalf("got %v, want the command's key at line 6", err)
	}
}

// A code mode timeout the gateway's request timeout would cut is refused
// where it would bite, the gateway, naming both keys; one within it, or
// code mode offered nowhere, is fine. Within it means by CodeRunMargin:
// a timeout equal to the request's was accepted, yet the run's own
// timeout starts after the gateway's (admission, a runner to start), so
// every run reaching it was cut and its error lost.
func TestCodeModeTimeoutFitsTheGatewaysRequests(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		ok   bool
	}{
		{"aggregator:\n  codeMode: {enabled: true, timeout: 5m}\n", false},
		{"aggregator:\n  codeMode: {enabled: true, timeout: 2m}\n", false},
		{"aggregator:\n  codeMode: {enabled: true, timeout: 118s}\n", false},
		{"aggregator:\n  codeMode: {enabled: true, timeout: 117s}\n", true},
		{"aggregator:\n  codeMode: {timeout: 5m}\nservers:\n  - {name: ops, backends: [b], codeMode: true}\n", false},
		{"aggregator:\n  codeMode: {enabled: true, timeout: 5m}\ngateway:\n  timeouts: {request: 6m}\n", true},
		{"aggregator:\n  codeMode: {enabled: true, timeout: 90s}\n", true},
		{"aggregator:\n  codeMode: {timeout: 5m}\n", true},
	} {
		cfg, err := Parse([]byte(tc.yaml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.validateRunsFitRequests()
		if (err == nil) != tc.ok || err != nil && !(strings.Contains(err.Error(), "gateway.timeouts.request") && strings.Contains(err.Error(), "aggregator.codeMode.timeout")) {
			t.Errorf("%s: %v", tc.yaml, err)
		}
	}
}

// TestASecondDocumentIsRefused: everything after a "---" line was
// dropped silently (a policy file among it left every caller allowed);
// a file holding a second document is refused, naming its line. A
// document start marker at the top, or one document ending in "...",
// is one document.
func TestASecondDocumentIsRefused(t *testing.T) {
	two := "gateway:\n  listen: 127.0.0.1:8080\n---\naggregator:\n  authz: {policyFile: /etc/policy.cedar}\n"
	if _, err := Parse([]byte(two), env(nil)); err == nil || !strings.Contains(err.Error(), "second YAML document") || !strings.Contains(err.Error(), "line 4") {
		t.Fatalf("two documents: %v, want a refusal naming line 4", err)
	}
	for _, one := range []string{"---\ngateway:\n  listen: 127.0.0.1:8080\n", "gateway:\n  listen: 127.0.0.1:8080\n...\n", ""} {
		if _, err := Parse([]byte(one), env(nil)); err != nil {
			t.Errorf("one document %q: %v", one, err)
		}
	}
}

// TestNegativeCountsAreRefused: a count, size or bound below zero took
// its key's default silently (aggregator.pageSize: -1 served the default
// page), as zero does; it is refused by key and line now, in every
// section, lists of sections included, as a negative duration is.
func TestNegativeCountsAreRefused(t *testing.T) {
	for _, key := range []string{
		"gateway.http.maxBodyBytes", "gateway.optimizer.limit", "gateway.sessions.maxDeleted",
		"aggregator.pageSize", "aggregator.fanOut", "aggregator.health.unhealthyThreshold", "aggregator.tasks.maxPerPrincipal",
		"aggregator.codeMode.maxCalls", "indexer.defaultLimit", "indexer.maxRevocationsPerCaller",
		"indexer.scopeCache.documents", "indexer.sessionStates.maxBytes", "rateLimits.limits[0].burst",
	} {
		var file strings.Builder
		parts := strings.Split(key, ".")
		for i, p := range parts {
			indent := strings.Repeat("  ", i)
			if name, list := strings.CutSuffix(p, "[0]"); list {
				file.WriteString(indent + name + ":\n" + indent + "  - name: l\n")
				// The list's item: its keys one level deeper.
				parts = append(parts[:i+1], parts[i+1:]...)
				file.WriteString(indent + "    " + parts[i+1] + ": -1\n")
				break
			}
			if i == len(parts)-1 {
				file.WriteString(indent + p + ": -1\n")
			} else {
				file.WriteString(indent + p + ":\n")
			}
		}
		_, err := Parse([]byte(file.String()), env(nil))
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "is negative") {
			t.Errorf("%s: -1: %v, want it refused by key\n%s", key, err, file.String())
		}
	}
	if _, err := Parse([]byte("aggregator:\n  pageSize: 0\n  fanOut: 4\n"), env(nil)); err != nil {
		t.Errorf("zero and positive counts: %v", err)
	}
}
