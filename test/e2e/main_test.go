// Package e2e tests Switchboard end to end through separate processes: demo
// backends, the aggregator, the indexer with a real PostgreSQL, and the
// gateway, spoken to by go-sdk clients in both protocol eras.
package e2e

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
