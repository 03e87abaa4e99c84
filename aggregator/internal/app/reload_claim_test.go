package app

import (
	"io"
	"log/slog"
	"testing"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/server"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// A reload of gateway.auth.oidc.groupsClaim, which the gateway applies
// live, reaches the aggregator's binding of callers' tokens at once:
// otherwise the gateway would make principals' groups of the new claim
// while the aggregator bound tokens with the old one, and refuse every
// tokenExchange call of a user with groups.
func TestReloadAppliesTheGroupsClaim(t *testing.T) {
	cfg := &config.Config{}
	cfg.Gateway.Auth.OIDC.GroupsClaim = "groups"
	opts, err := engine.OptionsFromConfig(cfg.Aggregator.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Log = log
	e, err := engine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	api := server.New(e).WithGroupsClaim(cfg.Gateway.Auth.OIDC.GroupsClaim)
	l := &live{started: cfg, applied: cfg, engine: e, api: api, log: log, services: svcauth.NewAuthenticator(nil)}
	next := *cfg
	next.Gateway.Auth.OIDC.GroupsClaim = "roles"
	if err := l.Apply(&next); err != nil {
		t.Fatal(err)
	}
	if got := api.GroupsClaim(); got != "roles" {
		t.Fatalf("after the reload tokens are bound with claim %q, want roles", got)
	}
}
