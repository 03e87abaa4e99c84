package devstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/pgcluster"
)

// Binary names, as built by make build.
const (
	AggregatorBin  = "switchboard-aggregator"
	IndexerBin     = "switchboard-indexer"
	GatewayBin     = "switchboard-gateway"
	DemoBackendBin = "switchboard-demo-backend"
)

// devDatabase is the database switchboard-dev creates in its throwaway
// PostgreSQL for the indexer.
const devDatabase = "switchboard"

// RunOptions configures Run.
type RunOptions struct {
	// ConfigPath is the deployment's configuration file.
	ConfigPath string
	// BinDir overrides dev.binDir and the default (the runner's directory).
	BinDir string
	// Ready receives the single line "ready <MCP URL>".
	Ready io.Writer
	// Output receives the children's output, prefixed by their names.
	Output io.Writer
	Log    *slog.Logger
}

// Run starts everything the configuration describes, prints the ready line
// once the gateway serves, and then waits. When ctx ends or any child exits
// it stops everything in reverse order of start, removes the throwaway
// database and its private files, and returns (an error if a child died).
func Run(ctx context.Context, opts RunOptions) (err error) {
	log := opts.Log
	raw, err := os.ReadFile(opts.ConfigPath)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	env, generated, err := serviceTokens(string(raw))
	if err != nil {
		return err
	}
	if len(generated) > 0 {
		// The names only: the values are secrets.
		log.Info("generated random service tokens for unset variables", "variables", strings.Join(generated, ","))
	}
	cfg, err := config.Parse(raw, lookupWith(env))
	if err != nil {
		return err
	}
	configDir := filepath.Dir(opts.ConfigPath)
	binDir, err := resolveBinDir(opts.BinDir, configDir, cfg.Dev.BinDir)
	if err != nil {
		return err
	}
	if err := checkConfig(cfg, binDir); err != nil {
		return err
	}
	// The binaries are on the children's PATH, so that a stdio backend
	// of the file names one by its name (switchboard-demo-backend).
	env = append(env, binPath(binDir))
	startTimeout := cfg.Dev.StartTimeout.Or(60 * time.Second)
	grace := cfg.Dev.StopGrace.Or(10 * time.Second)

	s := &stack{log: log, grace: grace, output: &SyncWriter{W: opts.Output}}
	// A signal while starting is a request to stop, not a failure.
	startErr := func(err error) error {
		if ctx.Err() != nil {
			log.Info("stopping before everything was ready")
			return nil
		}
		return err
	}
	defer func() {
		if stopErr := s.stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()

	// A private directory for the derived configuration; it holds no secret
	// values (tokens stay ${VAR} references) but is 0700 all the same.
	if s.privateDir, err = os.MkdirTemp("", "switchboard-dev-"); err != nil {
		return err
	}
	childConfig := opts.ConfigPath
	if cfg.Indexer.Database == "" {
		// The postmaster outlives the start-up context: it is stopped, in
		// order, by s.stop.
		s.pg, err = pgcluster.Start(context.WithoutCancel(ctx), pgcluster.Options{Logf: func(f string, a ...any) {
			log.Info(fmt.Sprintf(f, a...), "process", "postgres")
		}})
		if err != nil {
			return err
		}
		if err := s.pg.CreateDatabase(ctx, devDatabase); err != nil {
			return startErr(err)
		}
		derived, err := withDatabase(raw, s.pg.URL(devDatabase))
		if err != nil {
			return err
		}
		childConfig = filepath.Join(s.privateDir, "switchboard.yaml")
		if err := os.WriteFile(childConfig, derived, 0o600); err != nil {
			return err
		}
		// The services watch the copy; edits of the file the runner was
		// started with reach them through it, as in production.
		dbURL := s.pg.URL(devDatabase)
		var followCtx context.Context
		followCtx, s.stopFollowing = context.WithCancel(ctx)
		s.followers.Go(func() {
			follow(followCtx, log, opts.ConfigPath, raw, childConfig, func(raw []byte) ([]byte, error) {
				if err := newTokens(raw, generated); err != nil {
					return nil, err
				}
				return withDatabase(raw, dbURL)
			})
		})
	}

	start := func(name, bin string, args []string, probe Probe) error {
		p, err := StartProcess(ProcessSpec{Name: name, Path: filepath.Join(binDir, bin), Args: args, Env: env, Output: s.output})
		if err != nil {
			return err
		}
		s.procs = append(s.procs, p)
		readyCtx, cancel := context.WithTimeout(ctx, startTimeout)
		defer cancel()
		if err := WaitReady(readyCtx, p, probe); err != nil {
			return err
		}
		log.Info("ready", "process", name, "pid", p.Pid())
		return nil
	}

	for _, b := range cfg.Dev.Backends {
		args := []string{"--listen", b.Listen, "--name", b.Name}
		if b.Config != "" {
			args = append(args, "--config", relativeTo(configDir, b.Config))
		}
		if b.ToolsJSON != "" {
			args = append(args, "--tools-json", relativeTo(configDir, b.ToolsJSON))
		}
		if b.Synthetic > 0 {
			args = append(args, "--synthetic", strconv.Itoa(b.Synthetic))
		}
		if b.Stateful {
			args = append(args, "--stateful")
		}
		if tel := cfg.Telemetry; tel.OTLPEndpoint != "" {
			args = append(args, "--otlp-endpoint", tel.OTLPEndpoint)
			if tel.OTLPInsecure {
				args = append(args, "--otlp-insecure")
			}
		}
		if err := start("backend:"+b.Name, DemoBackendBin, args, HTTPOK("http://"+DialAddress(b.Listen)+"/healthz")); err != nil {
			return startErr(err)
		}
	}
	tls := cfg.ServiceAuth.TLS
	services := []struct {
		name, bin string
		probe     Probe
	}{
		{"aggregator", AggregatorBin, GRPCServing(DialAddress(cfg.Aggregator.Listen), tls)},
		{"indexer", IndexerBin, GRPCServing(DialAddress(cfg.Indexer.Listen), tls)},
		{"gateway", GatewayBin, HTTPOK("http://" + DialAddress(cfg.Gateway.WithDefaults().Listen) + "/readyz")},
	}
	for _, svc := range services {
		if err := start(svc.name, svc.bin, []string{"--config", childConfig}, svc.probe); err != nil {
			return startErr(err)
		}
	}

	fmt.Fprintf(opts.Ready, "ready http://%s/mcp\n", DialAddress(cfg.Gateway.WithDefaults().Listen))
	return s.wait(ctx)
}

// followInterval is how often the runner looks at its configuration file
// for edits to pass on to its private copy.
const followInterval = 250 * time.Millisecond

// follow rewrites copyPath from source whenever source's content changes
// (derive makes the copy's content), atomically, until ctx ends. A content
// that does not derive is logged and not passed on: the services keep the
// last good copy, as they keep a configuration they refuse.
func follow(ctx context.Context, log *slog.Logger, source string, last []byte, copyPath string, derive func([]byte) ([]byte, error)) {
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		raw, err := os.ReadFile(source)
		if err != nil || bytes.Equal(raw, last) {
			continue
		}
		last = raw
		derived, err := derive(raw)
		if err == nil {
			tmp := copyPath + ".next"
			if err = os.WriteFile(tmp, derived, 0o600); err == nil {
				err = os.Rename(tmp, copyPath)
			}
		}
		if err != nil {
			log.Warn("the edited configuration was not passed on to the services", "file", source, "err", err)
			continue
		}
		log.Info("configuration edited: passed on to the services, which reload it", "file", source)
	}
}

// stack is what Run started, in order.
type stack struct {
	log        *slog.Logger
	grace      time.Duration
	output     io.Writer
	privateDir string
	pg         *pgcluster.Cluster
	procs      []*Process
	// followers pass edits of the configuration file on to the private
	// copy until stopFollowing (follow).
	followers     sync.WaitGroup
	stopFollowing context.CancelFunc
}

// wait returns when ctx ends (nil) or a child exits (an error naming it).
func (s *stack) wait(ctx context.Context) error {
	exited := make(chan *Process, len(s.procs))
	for _, p := range s.procs {
		go func() {
			select {
			case <-p.Done():
				exited <- p
			case <-ctx.Done():
			}
		}()
	}
	select {
	case <-ctx.Done():
		s.log.Info("stopping")
		return nil
	case p := <-exited:
		return fmt.Errorf("%s exited unexpectedly (%v): stopping everything", p.Spec.Name, p.Err())
	}
}

// stop stops the children in reverse order of start, then PostgreSQL, then
// removes the private directory.
func (s *stack) stop() error {
	if s.stopFollowing != nil {
		s.stopFollowing()
	}
	s.followers.Wait()
	var errs []error
	for _, p := range slices.Backward(s.procs) {
		if err := p.Stop(s.grace); err != nil {
			select {
			case <-p.Done():
				// A child that already died was reported by wait.
			default:
				errs = append(errs, err)
			}
			s.log.Warn("stopped with error", "process", p.Spec.Name, "err", err)
		}
	}
	if s.pg != nil {
		if err := s.pg.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.privateDir != "" {
		if err := os.RemoveAll(s.privateDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// tokenRef matches a reference without a default to a Switchboard variable.
var tokenRef = regexp.MustCompile(`\$\{(SWITCHBOARD_[A-Za-z0-9_]*)\}`)

// serviceTokens returns NAME=value entries with random values for every
// ${SWITCHBOARD_...} reference in raw whose variable is unset, so a local
// run needs no secrets set by hand. The children get them in their
// environment; they are never printed.
func serviceTokens(raw string) (env, names []string, err error) {
	names = unsetTokens(raw, nil)
	for _, name := range names {
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, nil, err
		}
		env = append(env, name+"="+base64.RawURLEncoding.EncodeToString(secret))
	}
	return env, names, nil
}

// unsetTokens lists, once each, the ${SWITCHBOARD_...} references of raw
// whose variable is neither set nor one of known.
func unsetTokens(raw string, known []string) []string {
	var names []string
	for _, m := range tokenRef.FindAllStringSubmatch(raw, -1) {
		name := m[1]
		if _, set := os.LookupEnv(name); set || slices.Contains(known, name) || slices.Contains(names, name) {
			continue
		}
		names = append(names, name)
	}
	return names
}

// newTokens refuses an edit that references a token the running stack
// has no value for: the children's environment was set when they
// started, so every service would refuse the file.
func newTokens(raw []byte, generated []string) error {
	if missing := unsetTokens(string(raw), generated); len(missing) > 0 {
		return fmt.Errorf("it references %s, unset when the stack started (tokens are generated then): stop and start switchboard-dev again, or set them first",
			strings.Join(missing, ", "))
	}
	return nil
}

// withDatabase returns the configuration raw with indexer.database set to
// url. Everything else, ${VAR} references included, is kept as written,
// so no secret value lands in the derived file.
func withDatabase(raw []byte, url string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	indexer := mappingValue(doc.Content[0], "indexer", yaml.MappingNode)
	if indexer == nil {
		return nil, errors.New("config: the top level must be a mapping with an indexer mapping")
	}
	db := mappingValue(indexer, "database", yaml.ScalarNode)
	if db == nil {
		return nil, errors.New("config: indexer.database must be a string")
	}
	db.Tag, db.Style, db.Value = "!!str", yaml.DoubleQuotedStyle, url
	return yaml.Marshal(&doc)
}

// mappingValue returns the value of key in mapping m, adding it with the
// given kind when absent; nil when m is not a mapping or the value has
// another kind.
func mappingValue(m *yaml.Node, key string, kind yaml.Kind) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			if v.Kind == kind || (kind == yaml.MappingNode && v.Tag == "!!null") {
				if v.Kind != kind {
					*v = yaml.Node{Kind: kind}
				}
				return v
			}
			return nil
		}
	}
	v := &yaml.Node{Kind: kind}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	return v
}

// checkConfig catches what would otherwise fail later and less clearly.
func checkConfig(cfg *config.Config, binDir string) error {
	var errs []error
	for _, bin := range []string{AggregatorBin, IndexerBin, GatewayBin, DemoBackendBin} {
		if _, err := os.Stat(filepath.Join(binDir, bin)); err != nil {
			errs = append(errs, fmt.Errorf("%s not found in %s (run make build)", bin, binDir))
		}
	}
	names := map[string]bool{}
	for i, b := range cfg.Dev.Backends {
		if b.Name == "" || b.Listen == "" {
			errs = append(errs, fmt.Errorf("dev.backends[%d]: name and listen are required", i))
		}
		if names[b.Name] {
			errs = append(errs, fmt.Errorf("dev.backends: %q is listed twice", b.Name))
		}
		names[b.Name] = true
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// resolveBinDir picks the directory of the binaries: the flag, else
// dev.binDir (relative to the configuration file), else the runner's own.
func resolveBinDir(flagDir, configDir, devBinDir string) (string, error) {
	switch {
	case flagDir != "":
		return flagDir, nil
	case devBinDir != "":
		return relativeTo(configDir, devBinDir), nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the binaries: %w", err)
	}
	return filepath.Dir(exe), nil
}

// relativeTo resolves path against dir unless it is absolute.
func relativeTo(dir, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// binPath is the PATH entry of children: binDir first.
func binPath(binDir string) string {
	return "PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// lookupWith looks a variable up in env (NAME=value entries) first, then
// in the runner's environment: what the children will see.
func lookupWith(env []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, kv := range env {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				return v, true
			}
		}
		return os.LookupEnv(name)
	}
}
