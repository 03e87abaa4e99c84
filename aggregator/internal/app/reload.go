package app

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/authz"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/server"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/stdio"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// The aggregator's part of a configuration reload. What it applies live is
// listed in liveKeys and put in force by (*live).Apply; every other key it
// reads (readKeys) keeps its value from the start, and a change of one is
// logged as needing a restart.

// readKeys are the parts of the configuration file the aggregator reads.
var readKeys = []string{"aggregator", "serviceAuth", "grpc", "telemetry", "logging", "ops", "servers", "rateLimits", "reload", "audit",
	"gateway.auth.oidc.groupsClaim"}

// liveKeys are those of readKeys that Apply puts in force ("reload" is
// applied by the watch itself).
var liveKeys = append([]string{"aggregator.authz", "serviceAuth.credentials", "rateLimits", "reload",
	// Where code mode is offered (servers[].codeMode is under
	// "servers"); its bounds are read at start.
	"aggregator.codeMode.enabled",
	// The claim the gateway makes a principal's groups of, which binding a
	// caller's token to its principal reads too: applied as the gateway
	// applies it, live.
	"gateway.auth.oidc.groupsClaim",
	// The tokens the aggregator presents to the indexer (SetTokens).
	"aggregator.indexer.token", "aggregator.pinning.indexer.token"}, engineKeys...)

// engineKeys are what the engine reconfigures live (engine.Reconfigure):
// the backends, the naming, the virtual servers, the tool overrides, the
// instructions and the page sizes.
var engineKeys = []string{"aggregator.backends", "aggregator.conflictResolution", "aggregator.toolOverrides",
	"aggregator.instructions", "aggregator.pageSize", "aggregator.maxPageSize", "servers"}

// Validate checks everything the aggregator reads in cfg, as at start and
// on every reload: the sections (config.ValidateAggregator: backends,
// naming, servers, everything with a rule), the TLS files, the stdio
// backends' programs (found), and the Cedar policy file, which is read and
// parsed.
func Validate(cfg *config.Config) error {
	if err := errors.Join(cfg.ValidateAggregator(), rpc.CheckTLS(cfg.ServiceAuth.TLS), stdio.CheckCommands(cfg.Aggregator.Backends)); err != nil {
		return err
	}
	_, err := engine.OptionsFromConfig(cfg.Aggregator.WithDefaults())
	return err
}

// policyFile is a Cedar policy as read from its file: the parsed policy,
// and what it was parsed from, so that a reload parses and swaps only a
// policy whose path or content changed.
type policyFile struct {
	path  string
	sum   [sha256.Size]byte
	authz *authz.Authorizer
}

// readPolicy reads and parses the policy file at path; "" is no policy
// (everything allowed).
func readPolicy(path string) (policyFile, error) {
	if path == "" {
		return policyFile{}, nil
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return policyFile{}, fmt.Errorf("aggregator.authz.policyFile: %w", err)
	}
	az, err := authz.Parse(path, src)
	if err != nil {
		return policyFile{}, err
	}
	return policyFile{path: path, sum: sha256.Sum256(src), authz: az}, nil
}

// policyPaths is the watch's Related: the policy file's content counts as
// part of the configuration, since it usually lives in a file (a
// ConfigMap key) of its own.
func policyPaths(cfg *config.Config) []string {
	if p := cfg.Aggregator.Authz.PolicyFile; p != "" {
		return []string{p}
	}
	return nil
}

// live holds what the aggregator applies live, as in force now. Apply is
// called by one watch, never concurrently.
type live struct {
	started *config.Config
	// applied is the configuration last put in force.
	applied  *config.Config
	engine   *engine.Engine
	services *svcauth.Authenticator
	log      *slog.Logger
	limiter  *ratelimit.Limiter
	// api is the gRPC service, for the groups claim it binds tokens with.
	api *server.Server
	// indexers are the connections to the indexer, whose tokens a reload
	// replaces.
	indexers *indexers

	policy policyFile
	creds  []config.ServiceCredential
}

// Apply puts in force what the aggregator applies live of cfg, which
// Validate accepted: the backends, naming, virtual servers, tool
// overrides, instructions and page sizes (engineKeys, through
// engine.Reconfigure), the Cedar policy (aggregator.authz.policyFile, its
// path or its content) and the service credentials
// (serviceAuth.credentials: tokens, certificate identities, allow lists)
// and the rate limits (rateLimits).
// Everything is read and built before anything is swapped, and the engine
// goes first (it refuses options it cannot run with before changing
// anything), so an error changes nothing. A policy that changes with the
// backends or servers goes into force with them, in one build. The other keys that differ from
// the configuration at start are logged as needing a restart.
func (l *live) Apply(cfg *config.Config) error {
	pol, err := readPolicy(cfg.Aggregator.Authz.PolicyFile)
	if err != nil {
		return err
	}
	policyChanged := pol.path != l.policy.path || pol.sum != l.policy.sum
	if !policyChanged {
		pol = l.policy
	}
	engineChanged := config.ChangedUnder(config.Changed(l.applied, cfg), engineKeys...)
	if engineChanged {
		opts, err := engine.OptionsFromConfig(cfg.Aggregator.WithDefaults())
		if err != nil {
			return err
		}
		opts.Servers = cfg.Servers
		// The policy comes with the new catalogs, in one build: never the
		// new backends and servers under the old policy.
		opts.Authz = pol.authz
		if _, err := l.engine.Reconfigure(opts); err != nil {
			return err
		}
	}
	var limits *ratelimit.Set
	limitsChanged := config.ChangedUnder(config.Changed(l.applied, cfg), "rateLimits")
	if limitsChanged {
		if limits, err = ratelimit.Compile(cfg.RateLimits); err != nil {
			return err
		}
	}
	claimChanged := cfg.Gateway.Auth.OIDC.GroupsClaim != l.applied.Gateway.Auth.OIDC.GroupsClaim
	l.applied = cfg
	creds := slices.Clone(cfg.ServiceAuth.Credentials)
	credsChanged := !reflect.DeepEqual(creds, l.creds)

	// Everything is built: swap. Credentials first, so that a caller the
	// new policy is written for can already call.
	if credsChanged {
		l.services.Update(creds)
		l.creds = creds
		l.log.Info("serviceAuth.credentials reloaded", "credentials", len(creds))
	}
	if policyChanged {
		if !engineChanged {
			l.engine.SetAuthorizer(pol.authz)
		}
		l.policy = pol
		l.log.Info("aggregator.authz policy reloaded", "policy_file", pol.path)
	}
	if claimChanged && l.api != nil {
		l.api.SetGroupsClaim(cfg.Gateway.Auth.OIDC.GroupsClaim)
		l.log.Info("gateway.auth.oidc.groupsClaim reloaded: callers' tokens are bound with it")
	}
	if l.api != nil {
		// Cheap, and read from cfg: every reload puts it in force.
		l.api.SetCodeModeOffered(cfg.CodeModeIn)
	}
	if limitsChanged {
		l.limiter.Apply(limits)
		l.log.Info("rateLimits reloaded", "limits", len(cfg.RateLimits.Limits))
	}
	if l.indexers != nil && l.indexers.SetTokens(cfg) {
		l.log.Info("the aggregator's indexer tokens reloaded")
	}
	if restart := config.NeedRestart(config.Changed(l.started, cfg), readKeys, liveKeys); len(restart) > 0 {
		l.log.Warn("needs a restart: configuration changes not applied", "keys", restart)
	}
	return nil
}
