package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// CheckOptions configures Check.
type CheckOptions struct {
	ConfigPath string
	BinDir     string
	// Output receives every service's verdict.
	Output io.Writer
}

// checkDatabase stands in for the throwaway database switchboard-dev would
// create when indexer.database is empty: the indexer checks a URL's form
// at start, not that it answers.
const checkDatabase = "postgres://switchboard@127.0.0.1:5432/" + devDatabase

// Check validates a configuration file as each service would at start and
// on every reload (each binary's --check), with what switchboard-dev would
// give them (random values for unset ${SWITCHBOARD_...} tokens, a database
// when indexer.database is empty), and the runner's own checks. Every
// problem is printed, by key and line, never with a value; the error says
// which services refused the file.
func Check(ctx context.Context, opts CheckOptions) error {
	raw, err := os.ReadFile(opts.ConfigPath)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	env, _, err := serviceTokens(string(raw))
	if err != nil {
		return err
	}
	cfg, err := config.Parse(raw, lookupWith(env))
	if err != nil {
		fmt.Fprintf(opts.Output, "switchboard-dev: %v\n", err)
		return errors.New("the file does not parse")
	}
	binDir, err := resolveBinDir(opts.BinDir, filepath.Dir(opts.ConfigPath), cfg.Dev.BinDir)
	if err != nil {
		return err
	}
	env = append(env, binPath(binDir))
	var refused []string
	if err := checkConfig(cfg, binDir); err != nil {
		fmt.Fprintf(opts.Output, "switchboard-dev: %v\n", err)
		refused = append(refused, "switchboard-dev")
	}
	path := opts.ConfigPath
	if cfg.Indexer.Database == "" {
		derived, err := withDatabase(raw, checkDatabase)
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "switchboard-check-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, filepath.Base(opts.ConfigPath))
		if err := os.WriteFile(path, derived, 0o600); err != nil {
			return err
		}
	}
	for _, bin := range []string{AggregatorBin, IndexerBin, GatewayBin} {
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, bin), "--check", "--config", path)
		// The services' relative paths (a Cedar policy file) are read
		// from where the check runs, as at start.
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		// The derived copy's name is the file's own, in a directory of
		// no interest: name the file checked.
		fmt.Fprint(opts.Output, strings.ReplaceAll(string(out), path, opts.ConfigPath))
		if err != nil {
			refused = append(refused, bin)
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("refused by %s", strings.Join(refused, ", "))
	}
	return nil
}
