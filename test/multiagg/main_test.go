// Package multiagg tests what must hold when one service talks to several
// aggregator replicas, each a separate process: the catalog versions and
// digests that replicas report, the indexer's scope builds over replicas
// whose catalogs differ, and a Legacy backend's held call whose retry
// reaches another replica.
package multiagg

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
