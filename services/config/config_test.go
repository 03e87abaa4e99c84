package config

import (
	"math"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestExpand(t *testing.T) {
	lookup := env(map[string]string{"TOKEN": "s3cret", "EMPTY": ""})
	cases := []struct{ in, want, wantErr string }{
		{in: "token: ${TOKEN}", want: "token: s3cret"},
		{in: "token: ${EMPTY}", want: "token: "},
		{in: "token: ${MISSING:-fallback}", want: "token: fallback"},
		{in: "token: ${MISSING:-}", want: "token: "},
		{in: "price: $$5 and $HOME stay", want: "price: $5 and $HOME stay"},
		{in: "regex: ^a$", want: "regex: ^a$"},
		{in: "a: ${MISSING} b: ${ALSO_MISSING}", wantErr: "MISSING, ALSO_MISSING"},
	}
	for _, tc := range cases {
		got, err := Expand(tc.in, lookup)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Expand(%q) error = %v, want it to name %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseStrictAndDurations(t *testing.T) {
	c, err := Parse([]byte(`
serviceAuth:
  credentials:
    - name: gateway
      token: ${GW}
      assertPrincipals: true
gateway:
  listen: 127.0.0.1:8080
aggregator:
  catalogTTL: 45s
  backends:
    - name: a
      url: http://127.0.0.1:9101/mcp
`), env(map[string]string{"GW": "tok"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ServiceAuth.Credentials[0].Token != "tok" || !c.ServiceAuth.Credentials[0].AssertPrincipals {
		t.Fatalf("credential not decoded: %+v", c.ServiceAuth.Credentials[0])
	}
	if got := c.Aggregator.CatalogTTL.Or(time.Second); got != 45*time.Second {
		t.Fatalf("catalogTTL = %v", got)
	}
	if got := c.Aggregator.FanOut; got != 0 {
		t.Fatalf("unset field = %v", got)
	}

	// References in comments are not expanded, and a secret with YAML
	// syntax in it stays one value.
	c, err = Parse([]byte(`
# token: ${NOT_SET_ANYWHERE}
aggregator:
  pageSize: ${PAGE}
  backends:
    - name: a
      url: http://x
      headers:
        Authorization: "Bearer ${TOK}"
`), env(map[string]string{"PAGE": "50", "TOK": "a #b: c"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Aggregator.PageSize != 50 || c.Aggregator.Backends[0].Headers["Authorization"] != "Bearer a #b: c" {
		t.Fatalf("expansion: pageSize=%d header=%q", c.Aggregator.PageSize, c.Aggregator.Backends[0].Headers["Authorization"])
	}
	if _, err := Parse([]byte("gateway:\n  listen: ${NOPE}\n"), env(nil)); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("unset reference accepted: %v", err)
	}

	// A secret that looks like a number or a boolean stays the exact text.
	for _, secret := range []string{"0123", "true", "1e3"} {
		c, err := Parse([]byte("serviceAuth:\n  credentials:\n    - name: g\n      token: ${T}\n"), env(map[string]string{"T": secret}))
		if err != nil || c.ServiceAuth.Credentials[0].Token != secret {
			t.Fatalf("secret %q decoded as %q (%v)", secret, c.ServiceAuth.Credentials[0].Token, err)
		}
	}

	// A typo must fail loudly rather than silently leave a setting unset.
	if _, err := Parse([]byte("gateway:\n  lisen: x\n"), env(nil)); err == nil || !strings.Contains(err.Error(), "lisen") {
		t.Fatalf("unknown key accepted: %v", err)
	}
	if _, err := Parse([]byte("aggregator:\n  catalogTTL: soon\n"), env(nil)); err == nil {
		t.Fatal("bad duration accepted")
	}
	if c, err := Parse(nil, env(nil)); err != nil || c == nil {
		t.Fatalf("empty file: %v", err)
	}
}

// The profiles are off unless ops.pprof says otherwise, and the gateway's
// ops port is off unless gateway.opsListen names one.
func TestOpsSettings(t *testing.T) {
	c, err := Parse([]byte("gateway:\n  listen: 127.0.0.1:8080\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Ops.Pprof || c.Gateway.OpsListen != "" {
		t.Errorf("defaults: ops.pprof %v, gateway.opsListen %q; want false and empty", c.Ops.Pprof, c.Gateway.OpsListen)
	}
	c, err = Parse([]byte("ops:\n  pprof: true\ngateway:\n  opsListen: 127.0.0.1:9090\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Ops.Pprof || c.Gateway.OpsListen != "127.0.0.1:9090" {
		t.Errorf("ops.pprof %v, gateway.opsListen %q", c.Ops.Pprof, c.Gateway.OpsListen)
	}
	if _, err := Parse([]byte("ops:\n  profiles: true\n"), env(nil)); err == nil {
		t.Error("an unknown key under ops must be an error")
	}
}

// ops.heapFloorMiB: 64 MiB unless set, 0 turns it off, and a value out of
// its range is refused by key.
func TestHeapFloorSetting(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want uint64
	}{{"", 64 << 20}, {"ops:\n  heapFloorMiB: 0\n", 0}, {"ops:\n  heapFloorMiB: 256\n", 256 << 20}} {
		c, err := Parse([]byte(tc.yaml), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Ops.Validate(); err != nil {
			t.Errorf("%q: %v", tc.yaml, err)
		}
		if got := c.Ops.HeapFloorBytes(); got != tc.want {
			t.Errorf("%q: floor %d bytes, want %d", tc.yaml, got, tc.want)
		}
	}
	for _, bad := range []string{"-1", "65537"} {
		// Refused when the file is read (a negative count) or validated.
		c, err := Parse([]byte("ops:\n  heapFloorMiB: "+bad+"\n"), env(nil))
		if err == nil {
			err = c.Ops.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "ops.heapFloorMiB") {
			t.Errorf("heapFloorMiB %s: %v, want a refusal naming the key", bad, err)
		}
	}
}

// TestGatewayBoundsDefaultsAndValidation: every bound of client-held state
// has a default, and bounds that contradict each other are refused.
func TestGatewayBoundsDefaultsAndValidation(t *testing.T) {
	g := Gateway{Aggregator: Endpoint{Address: "127.0.0.1:1"}}.WithDefaults()
	s := g.Sessions
	if s.MaxSubscriptions != MaxSessionSubscriptions || s.MaxURIBytes != DefaultSessionMaxURIBytes || s.MaxPerPrincipal != DefaultSessionsPerPrincipal ||
		s.MaxPrincipalStateBytes != DefaultPrincipalSessionStateBytes || s.MaxStateBytes != DefaultSessionStateBytes || s.MaxDeleted != DefaultMaxDeletedSessions {
		t.Fatalf("session bounds %+v", s)
	}
	if g.HTTP.BodyTimeout.Or(0) != DefaultBodyTimeout || g.HTTP.ReadHeaderTimeout.Or(0) != DefaultReadHeaderTimeout || g.Timeouts.ClientInput.Or(0) != DefaultClientInputTimeout ||
		g.ShutdownGrace.Or(0) != DefaultShutdownGrace {
		t.Fatalf("timeouts %+v %+v", g.HTTP, g.Timeouts)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	tooMany := g
	tooMany.Sessions.MaxSubscriptions = MaxSessionSubscriptions + 1
	unfair := g
	unfair.Sessions.MaxPrincipalStateBytes = g.Sessions.MaxStateBytes + 1
	for name, bad := range map[string]Gateway{"maxSubscriptions": tooMany, "maxPrincipalStateBytes": unfair} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestTelemetryValidate(t *testing.T) {
	for _, r := range []float64{0, 0.25, 1} {
		if err := (Telemetry{SampleRatio: &r}).Validate(); err != nil {
			t.Errorf("sampleRatio %v: %v", r, err)
		}
	}
	for _, r := range []float64{-0.1, 1.5, math.NaN(), math.Inf(1)} {
		if err := (Telemetry{SampleRatio: &r}).Validate(); err == nil {
			t.Errorf("sampleRatio %v accepted", r)
		}
	}
}
