package app

import (
	"crypto/rand"
	"encoding/hex"
	"os"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/server"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
)

// withTasks lets api run tasks when a tool override asks for them: they are
// kept by the indexer (aggregator.indexer), read at start. self, the
// replica's advertised address when it has peers, names it as the runner
// of its tasks' rounds, with a random part so that a restarted replica
// never takes its predecessor's leases for its own.
func withTasks(env lifecycle.Env, api *server.Server, idx *indexers, self string) error {
	if !env.Config.RunsTasks() {
		return nil
	}
	store, err := idx.clusterState(env.Config.Aggregator.IndexerEndpoint(), "aggregator.indexer (aggregator.tasks)")
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
