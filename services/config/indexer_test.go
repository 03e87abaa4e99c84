package config

import (
	"strings"
	"testing"
	"time"
)

func TestIndexerDefaults(t *testing.T) {
	got := Indexer{}.WithDefaults()
	if time.Duration(got.ScopeTTL) != 30*time.Second || got.DefaultLimit != 8 || got.MaxLimit != 50 ||
		time.Duration(got.GCInterval) != 10*time.Minute || time.Duration(got.ScopeRetention) != 24*time.Hour ||
		time.Duration(got.MaxRevocationTTL) != 24*time.Hour || got.SessionStates.MaxBytes != 64<<20 ||
		got.ScopeCache != (IndexerScopeCache{Documents: 50_000, Memberships: 100_000}) {
		t.Fatalf("defaults %+v", got)
	}
	for _, c := range []struct{ def, max, wantDef, wantMax int }{
		{0, 0, 8, 50}, {20, 0, 20, 50}, {20, 10, 10, 10}, {0, 500, 8, 50}, {-3, -1, 8, 50}, {5, 5, 5, 5},
	} {
		got := Indexer{DefaultLimit: c.def, MaxLimit: c.max}.WithDefaults()
		if got.DefaultLimit != c.wantDef || got.MaxLimit != c.wantMax {
			t.Errorf("limits %d/%d became %d/%d, want %d/%d", c.def, c.max, got.DefaultLimit, got.MaxLimit, c.wantDef, c.wantMax)
		}
	}
	set := Indexer{ScopeTTL: Duration(time.Minute), MaxRevocationTTL: Duration(time.Hour), SessionStates: IndexerSessionStates{MaxBytes: 1 << 20},
		ScopeCache: IndexerScopeCache{Documents: 7, Memberships: 9}}.WithDefaults()
	if time.Duration(set.ScopeTTL) != time.Minute || time.Duration(set.MaxRevocationTTL) != time.Hour || set.SessionStates.MaxBytes != 1<<20 ||
		set.ScopeCache != (IndexerScopeCache{Documents: 7, Memberships: 9}) {
		t.Fatalf("set values overridden: %+v", set)
	}
}

func TestIndexerValidate(t *testing.T) {
	err := Indexer{}.Validate()
	for _, want := range []string{"indexer.listen", "indexer.database", "indexer.aggregator.address"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("empty section: %v, want it to name %s", err, want)
		}
	}
	ok := Indexer{Listen: ":0", Database: "postgres://x", Aggregator: Endpoint{Address: "agg:1"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestRevocationBounds(t *testing.T) {
	if got := (Indexer{}).WithDefaults().MaxRevocationsPerCaller; got != DefaultMaxRevocationsPerCaller {
		t.Errorf("maxRevocationsPerCaller default %d", got)
	}
	for _, tc := range []struct {
		maxTTL, sessionTTL, want time.Duration
	}{
		{0, 0, 24 * time.Hour},
		{0, time.Hour, time.Hour},
		{2 * time.Hour, 0, 2 * time.Hour},
		{2 * time.Hour, 3 * time.Hour, 2 * time.Hour},
	} {
		c := &Config{}
		c.Indexer.MaxRevocationTTL = Duration(tc.maxTTL)
		c.Gateway.Sessions.TTL = Duration(tc.sessionTTL)
		if got := c.RevocationTTL(); got != tc.want {
			t.Errorf("maxRevocationTTL %s, sessions.ttl %s: RevocationTTL %s, want %s", tc.maxTTL, tc.sessionTTL, got, tc.want)
		}
	}
}

// A Legacy session may not outlive the record of its deletion: a
// gateway.sessions.ttl longer than indexer.maxRevocationTTL was taken,
// and a deleted session then opened again on other replicas once its
// revocation, cut to the shorter bound, expired.
func TestSessionsOutlivingRevocationsAreRefused(t *testing.T) {
	c := &Config{}
	c.Gateway.Aggregator = Endpoint{Address: "127.0.0.1:9090", Token: "t"}
	c.Gateway.Sessions.TTL = Duration(72 * time.Hour)
	// A gateway without an indexer keeps its sessions' deletions itself,
	// for as long as the sessions live.
	if err := c.ValidateGateway(); err != nil {
		t.Fatalf("a gateway without an indexer, with a 72h session TTL: %v", err)
	}
	c.Gateway.Indexer = Endpoint{Address: "127.0.0.1:9091", Token: "t"}
	c.Indexer.Listen, c.Indexer.Database = "127.0.0.1:9091", "postgres://x@localhost/db"
	for name, validate := range map[string]func() error{"gateway": c.ValidateGateway, "indexer": c.ValidateIndexer} {
		if err := validate(); err == nil || !strings.Contains(err.Error(), "gateway.sessions.ttl") {
			t.Errorf("%s: a 72h session TTL with the 24h revocation bound: %v", name, err)
		}
	}
	c.Indexer.MaxRevocationTTL = Duration(72 * time.Hour)
	for name, validate := range map[string]func() error{"gateway": c.ValidateGateway, "indexer": c.ValidateIndexer} {
		if err := validate(); err != nil && strings.Contains(err.Error(), "gateway.sessions.ttl") {
			t.Errorf("%s: a 72h session TTL with a 72h revocation bound: %v", name, err)
		}
	}
}
