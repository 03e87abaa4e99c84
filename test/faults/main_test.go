// Package faults injects faults into a running Switchboard (separate
// processes, real PostgreSQL, go-sdk clients in both eras) and checks that
// each part fails cleanly and recovers by itself: a backend killed under
// load, the aggregator killed with calls in flight, PostgreSQL stopped
// under the optimizer, and one of two gateways killed under a Legacy
// session.
package faults

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
