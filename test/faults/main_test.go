// Package faults injects faults into a running Switchboard (separate
// processes, real PostgreSQL, go-sdk clients in both eras) and checks that
// each part fails cleanly and recovers by itself: a backend killed under
// load (one serving both eras, one Legacy only), the aggregator killed with
// calls in flight, the indexer killed and PostgreSQL stopped under the
// optimizer, one of two gateways killed under a Legacy session, and the
// OIDC issuer hanging and failing under an oidc gateway. After
// each, every process not deliberately killed is still running and no log
// holds a panic.
package faults

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
