// Package replicas runs Switchboard as a cluster: two gateways, two
// aggregators and two indexers over one PostgreSQL, with HAProxy balancing
// every HTTP request round-robin over the gateways (no stickiness), and
// checks that every feature works when consecutive requests of one client
// land on different replicas, in both MCP eras, and that killing one
// replica of each service under load loses nothing but the killed
// process's own requests in flight.
//
// The pieces, one file each: dns_test.go (a DNS server naming both
// aggregators and both indexers, for gRPC's dns resolver), lb_test.go (the
// HAProxy configuration and process), cluster_test.go (the configuration
// of every replica, in one place, and starting the processes),
// clients_test.go (go-sdk clients that record which gateway served each
// request). The tests: features_test.go (TestFeaturesAcrossReplicas, with
// its cases in cases_test.go and spread_test.go) and faults_test.go
// (TestReplicaKilledUnderLoad).
//
// HAProxy is required: make test installs it (make haproxy) and passes its
// path as $HAPROXY; without it the tests fail.
package replicas

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
