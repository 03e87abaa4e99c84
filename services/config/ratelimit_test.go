package config

import (
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"100/s": 100, "600/m": 10, "36/h": 0.01, " 2.5 / s ": 2.5, "1/h": MinRateLimitRate} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// Slower than one an hour would keep a bucket's row for years.
	for _, in := range []string{"", "100", "0/s", "-1/s", "x/s", "10/d", "2000000/s", "0.5/h", "1e-9/s", "NaN/s", "nan/m", "Inf/s", "+Inf/h", "1e400/s"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) accepted", in)
		}
	}
}

func TestRateLimitsValidate(t *testing.T) {
	ok := RateLimits{Limits: []RateLimit{
		{Name: "each-user", Per: "principal", Rate: "10/s", Burst: 20},
		{Name: "tickets", Per: "tool", Rate: "50/s", Match: RateLimitMatch{Tools: []string{"tickets_search"}}},
		{Name: "github", Per: "backend", Rate: "100/s", Match: RateLimitMatch{Backends: []string{"github"}}},
		{Name: "support", Per: "server", Rate: "200/s", Match: RateLimitMatch{Servers: []string{"support"}}},
		{Name: "bots", Per: "principal", Rate: "600/m", Methods: []string{"find_tool"}, Match: RateLimitMatch{Groups: []string{"bot-*"}}},
		{Name: "polls", Per: "tool", Rate: "5/s", Methods: []string{"tasks/get", "tasks/update", "tasks/cancel"}},
	}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if b := ok.Limits[1].EffectiveBurst(50); b != 50 {
		t.Fatalf("default burst %d, want a second's worth", b)
	}
	if m := ok.Limits[1].EffectiveMethods(); len(m) != 1 || m[0] != "tools/call" {
		t.Fatalf("per-tool methods %v", m)
	}
	cases := map[string]RateLimits{
		"onUnavailable":               {OnUnavailable: "maybe"},
		"name":                        {Limits: []RateLimit{{Per: "principal", Rate: "1/s"}}},
		"used twice":                  {Limits: []RateLimit{{Name: "a", Per: "principal", Rate: "1/s"}, {Name: "a", Per: "tool", Rate: "1/s"}}},
		"per":                         {Limits: []RateLimit{{Name: "a", Per: "session", Rate: "1/s"}}},
		"rate":                        {Limits: []RateLimit{{Name: "a", Per: "principal", Rate: "fast"}}},
		"burst":                       {Limits: []RateLimit{{Name: "a", Per: "principal", Rate: "1/s", Burst: -1}}},
		"not one of":                  {Limits: []RateLimit{{Name: "a", Per: "principal", Rate: "1/s", Methods: []string{"tools/list"}}}},
		"names no tool":               {Limits: []RateLimit{{Name: "a", Per: "tool", Rate: "1/s", Methods: []string{"find_tool"}}}},
		"names no backend":            {Limits: []RateLimit{{Name: "a", Per: "backend", Rate: "1/s", Methods: []string{"find_tool"}}}},
		"tasks/list names no tool":    {Limits: []RateLimit{{Name: "a", Per: "tool", Rate: "1/s", Methods: []string{"tasks/list"}}}},
		"tasks/list names no backend": {Limits: []RateLimit{{Name: "a", Per: "backend", Rate: "1/s", Methods: []string{"tasks/list"}}}},
		"not a name or glob":          {Limits: []RateLimit{{Name: "a", Per: "principal", Rate: "1/s", Match: RateLimitMatch{Tools: []string{""}}}}},
	}
	for want, rl := range cases {
		if err := rl.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
	many := RateLimits{}
	for i := range MaxRateLimits + 1 {
		many.Limits = append(many.Limits, RateLimit{Name: "l" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Per: "principal", Rate: "1/s"})
	}
	if err := many.Validate(); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Fatalf("65 limits: %v", err)
	}
}

// TestValidateAggregatorRateLimits: limits the aggregator applies need the
// indexer; find_tool's alone do not.
func TestValidateAggregatorRateLimits(t *testing.T) {
	c := &Config{RateLimits: RateLimits{Limits: []RateLimit{{Name: "u", Per: "principal", Rate: "1/s"}}}}
	if err := c.ValidateRateLimits(); err == nil || !strings.Contains(err.Error(), "aggregator.indexer") {
		t.Fatalf("no indexer: %v", err)
	}
	c.Aggregator.Pinning.Indexer = Endpoint{Address: "idx:1", Token: "t"}
	if err := c.ValidateRateLimits(); err != nil {
		t.Fatalf("pinning.indexer serves: %v", err)
	}
	c = &Config{RateLimits: RateLimits{Limits: []RateLimit{{Name: "u", Per: "principal", Rate: "1/s", Methods: []string{"find_tool"}}}}}
	if err := c.ValidateRateLimits(); err != nil {
		t.Fatalf("find_tool only: %v", err)
	}
}
