package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/devstack"
)

// startProcesses runs the demo backend serving the tool set, the
// aggregator in front of it and the indexer, as separate processes from
// binDir, all configured by one generated configuration file.
func startProcesses(ctx context.Context, binDir, toolsPath, dbURL string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return "", nil, err
	}
	var procs []*devstack.Process
	stopAll := func() {
		for i := len(procs) - 1; i >= 0; i-- {
			_ = procs[i].Stop(10 * time.Second)
		}
		_ = os.RemoveAll(dir)
	}
	fail := func(err error) (string, func(), error) {
		stopAll()
		return "", nil, err
	}
	var addrs [3]string
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return fail(err)
		}
	}
	backendAddr, aggAddr, idxAddr := addrs[0], addrs[1], addrs[2]
	absTools, err := filepath.Abs(toolsPath)
	if err != nil {
		return fail(err)
	}
	cfg := fmt.Sprintf(`serviceAuth:
  credentials:
    - {name: indexer, token: %[1]q, assertPrincipals: true, allow: [switchboard.aggregator.v1.AggregatorService/Discover, switchboard.aggregator.v1.AggregatorService/ListTools, switchboard.aggregator.v1.AggregatorService/WatchCatalog]}
    - {name: bench, token: %[2]q, assertPrincipals: true, allow: ["switchboard.indexer.v1.IndexerService/*"]}
logging: {level: warn}
aggregator:
  listen: %[3]q
  backends:
    - {name: %[4]s, url: "http://%[5]s/mcp"}
indexer:
  listen: %[6]q
  database: %[7]q
  aggregator: {address: %[3]q, token: %[1]q}
`, "bench-indexer-token", benchToken, aggAddr, benchBackend, backendAddr, idxAddr, dbURL)
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return fail(err)
	}
	out := &devstack.SyncWriter{W: os.Stderr}
	steps := []struct {
		spec  devstack.ProcessSpec
		probe devstack.Probe
	}{
		{devstack.ProcessSpec{Name: "backend", Path: filepath.Join(binDir, "switchboard-demo-backend"),
			Args: []string{"--listen", backendAddr, "--name", benchBackend, "--tools-json", absTools}},
			devstack.HTTPOK("http://" + backendAddr + "/healthz")},
		{devstack.ProcessSpec{Name: "aggregator", Path: filepath.Join(binDir, "switchboard-aggregator"), Args: []string{"--config", cfgPath}},
			devstack.GRPCServing(aggAddr, config.TLS{})},
		{devstack.ProcessSpec{Name: "indexer", Path: filepath.Join(binDir, "switchboard-indexer"), Args: []string{"--config", cfgPath}},
			devstack.GRPCServing(idxAddr, config.TLS{})},
	}
	for _, s := range steps {
		s.spec.Output = out
		p, err := devstack.StartProcess(s.spec)
		if err != nil {
			return fail(err)
		}
		procs = append(procs, p)
		readyCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err = devstack.WaitReady(readyCtx, p, s.probe)
		cancel()
		if err != nil {
			return fail(err)
		}
	}
	return idxAddr, stopAll, nil
}
