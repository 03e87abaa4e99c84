package app

import (
	"crypto/rand"
	"encoding/hex"
	"os"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/server"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

// withTasks lets api make tasks when it has an indexer to keep them
// (aggregator.indexer, read at start): the tasks a tool override asks
// Switchboard to run, and those of backends that run tasks themselves.
// Without one, calls run as any other. self, the
// replica's advertised address when it has peers, names it as the runner
// of its tasks' rounds, with a random part so that a restarted replica
// never takes its predecessor's leases for its own.
func withTasks(env lifecycle.Env, api *server.Server, idx *indexers, self string) error {
	ep := env.Config.Aggregator.IndexerEndpoint()
	if ep.Address == "" || ep.Token == "" {
		return nil
	}
	store, err := idx.clusterState(keyIndexer, "aggregator.indexer (aggregator.tasks)")
	if err != nil {
		return err
	}
	if self == "" {
		self, _ = os.Hostname()
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // never fails (crypto/rand)
	api.WithTasks(store, env.Config.Aggregator.Tasks.WithDefaults(), self+"/"+hex.EncodeToString(nonce[:]))
	return nil
}
