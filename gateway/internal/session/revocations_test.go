package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/pgcluster"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// gatewayToken is the gateway's service credential at the indexer.
const gatewayToken = "revocations-test-gateway-token"

var (
	buildOnce   sync.Once
	indexerPath string
	buildErr    error
)

// indexerBinary is switchboard-indexer from $SWITCHBOARD_BIN (make build
// fills bin/), or built once per test binary from this workspace.
func indexerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if dir := os.Getenv("SWITCHBOARD_BIN"); dir != "" {
			indexerPath = filepath.Join(dir, "switchboard-indexer")
			if _, buildErr = os.Stat(indexerPath); buildErr != nil {
				buildErr = fmt.Errorf("SWITCHBOARD_BIN=%s lacks switchboard-indexer (run make build): %w", dir, buildErr)
			}
			return
		}
		root, err := os.Getwd()
		for err == nil {
			if _, statErr := os.Stat(filepath.Join(root, "go.work")); statErr == nil {
				break
			}
			if parent := filepath.Dir(root); parent != root {
				root = parent
				continue
			}
			err = fmt.Errorf("no go.work above the test's directory: set SWITCHBOARD_BIN")
		}
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "switchboard-session-test-")
		if err != nil {
			buildErr = err
			return
		}
		indexerPath = filepath.Join(dir, "switchboard-indexer")
		cmd := exec.Command("go", "build", "-o", indexerPath, "./indexer/cmd/switchboard-indexer")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build switchboard-indexer: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return indexerPath
}

// indexerProcess is one switchboard-indexer serving on addr.
type indexerProcess struct {
	addr string
	proc *devstack.Process
}

func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// startIndexer runs an indexer on addr over the database, and waits until
// its gRPC health is SERVING (its migrations are applied).
func startIndexer(t *testing.T, addr, databaseURL string) *indexerProcess {
	t.Helper()
	cfg := fmt.Sprintf(`serviceAuth:
  credentials:
    - {name: gateway, token: %q, assertPrincipals: true, allow: ["switchboard.indexer.v1.IndexerService/*"]}
logging: {level: info}
indexer:
  listen: %q
  database: %q
  # No aggregator runs: revocations do not need one.
  aggregator: {address: "127.0.0.1:1", token: unused}
`, gatewayToken, addr, databaseURL)
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.LogBuffer{}
	proc, err := devstack.StartProcess(devstack.ProcessSpec{Name: "indexer " + addr, Path: indexerBinary(t),
		Args: []string{"--config", path}, Output: logs})
	if err != nil {
		t.Fatal(err)
	}
	p := &indexerProcess{addr: addr, proc: proc}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("indexer %s log:\n%s", addr, logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := devstack.WaitReady(ctx, proc, devstack.GRPCServing(addr, config.TLS{})); err != nil {
		t.Fatal(err)
	}
	return p
}

// stop ends the process (SIGTERM, as an orchestrator would) and waits.
func (p *indexerProcess) stop() { _ = p.proc.Stop(15 * time.Second) }

func indexerClient(t *testing.T, addr string) indexerv1.IndexerServiceClient {
	t.Helper()
	conn, err := rpc.Dial(config.Endpoint{Address: addr, Token: gatewayToken}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return indexerv1.NewIndexerServiceClient(conn)
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// A session deleted on one gateway reaches another through two indexer
// processes sharing one PostgreSQL, ahead of any request for it; a gateway
// that connects later gets it in its snapshot; and with every indexer
// stopped, each gateway still answers from what it holds.
func TestRevocationsReachEveryGateway(t *testing.T) {
	ctx := t.Context()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{TCP: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	if err := cluster.CreateDatabase(ctx, "revocations"); err != nil {
		t.Fatal(err)
	}
	db := cluster.URL("revocations")
	x := startIndexer(t, freeAddr(t), db)
	y := startIndexer(t, freeAddr(t), db)

	logs := &testkit.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	one := NewRevocations(indexerClient(t, x.addr), roomy, log)
	t.Cleanup(func() { one.Close(context.Background()) })
	two := NewRevocations(indexerClient(t, y.addr), roomy, log)
	t.Cleanup(func() { two.Close(context.Background()) })
	reg := prometheus.NewRegistry()
	if err := two.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "both gateways to watch", 60*time.Second, func() bool { return one.Watching() && two.Watching() })
	if gauge(t, reg, "switchboard_gateway_revocation_watch_up") != 1 {
		t.Fatal("watch-up metric is not 1 while watching")
	}

	// Revoked takes no context: it never calls out, and the answers below
	// come from what the watch delivered.
	deleted := IDDigest("s1.deleted-on-gateway-one")
	expiry := time.Now().Add(time.Hour)
	if two.Revoked(deleted) {
		t.Fatal("revoked before it was deleted")
	}
	if err := one.Revoke(deleted, "alice", expiry); err != nil {
		t.Fatal(err)
	}
	if !one.Revoked(deleted) {
		t.Fatal("the deleting gateway does not hold its own revocation")
	}
	// Gateway two learns of it ahead of any request for that session.
	testkit.Eventually(t, "the deletion to reach gateway two", 60*time.Second, func() bool { return two.Len() == 1 })
	if !two.Revoked(deleted) {
		t.Fatal("gateway two holds a revocation, but not this one")
	}
	if gauge(t, reg, "switchboard_gateway_revocations") != 1 {
		t.Fatal("revocation count metric")
	}

	// A deletion the indexer refuses (InvalidArgument: here an expiry past
	// what a protobuf timestamp can hold) is not asked again: it leaves the
	// pending set, and the refusal is logged. (An expiry merely past the
	// indexer's bound is clamped, not refused.)
	if err := one.Revoke(IDDigest("s1.too-far"), "alice", time.Date(10001, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the refused deletion to leave the pending set", 60*time.Second, func() bool { return one.Pending() == 0 })
	if !strings.Contains(logs.String(), "refused a session deletion") {
		t.Fatalf("the refusal is not logged:\n%s", logs.String())
	}

	// A gateway that starts later gets it with its snapshot.
	three := NewRevocations(indexerClient(t, y.addr), roomy, log)
	t.Cleanup(func() { three.Close(context.Background()) })
	testkit.Eventually(t, "gateway three to watch", 60*time.Second, three.Watching)
	if !three.Revoked(deleted) {
		t.Fatal("the snapshot lacks an earlier revocation")
	}

	// Every indexer gone: the watches go down, and the gateways answer at
	// once from what they hold, which now includes deletions made on
	// other replicas.
	x.stop()
	y.stop()
	testkit.Eventually(t, "the watches to notice", 60*time.Second, func() bool { return !one.Watching() && !two.Watching() && !three.Watching() })
	// The watch is marked down before the gauge and the log say so.
	testkit.Eventually(t, "the outage shown and logged", 10*time.Second, func() error {
		if gauge(t, reg, "switchboard_gateway_revocation_watch_up") != 0 {
			return errors.New("watch-up metric is not 0 while down")
		}
		if !strings.Contains(logs.String(), "fail open") {
			return errors.New("the outage is not logged")
		}
		return nil
	})
	if !two.Revoked(deleted) || !three.Revoked(deleted) {
		t.Fatal("a gateway forgot a deletion while the indexers are down")
	}
	if two.Revoked(IDDigest("s1.live")) {
		t.Fatal("a live session reads as revoked")
	}
	// Deleting while the indexer is down takes effect on this replica at
	// once and never waits: the indexer gets it once it is back.
	later := IDDigest("s1.deleted-while-down")
	if err := two.Revoke(later, "alice", expiry); err != nil {
		t.Fatal(err)
	}
	if !two.Revoked(later) || two.Pending() != 1 {
		t.Fatalf("a deletion during the outage: revoked %v, pending %d", two.Revoked(later), two.Pending())
	}
	testkit.Eventually(t, "the failed publication to be logged", 60*time.Second, func() bool { return strings.Contains(logs.String(), "not recorded in the indexer yet") })
	if gauge(t, reg, "switchboard_gateway_revocations_pending") != 1 {
		t.Fatal("pending metric")
	}

	// An indexer back on the same address: the watch reconnects by itself,
	// the deletion made meanwhile is recorded, and reaches the gateway
	// that watches the same database.
	startIndexer(t, y.addr, db)
	testkit.Eventually(t, "gateway two to watch again", 60*time.Second, two.Watching)
	if !two.Revoked(deleted) {
		t.Fatal("lost a revocation across the reconnect")
	}
	testkit.Eventually(t, "the deletion made during the outage to be recorded", 60*time.Second, func() bool { return two.Pending() == 0 })
	testkit.Eventually(t, "the deletion made during the outage to reach gateway three", 60*time.Second, func() bool { return three.Revoked(later) })
}

// roomy are bounds the tests do not reach.
var roomy = RevocationLimits{Total: 1000, PerPrincipal: 1000}

// Expired revocations are dropped, so the map holds live deleted sessions
// only.
func TestRevocationsExpire(t *testing.T) {
	r := NewRevocations(nil, roomy, slog.New(slog.DiscardHandler))
	defer r.Close(context.Background())
	now := time.Now()
	r.now = func() time.Time { return now }
	a, b, c := IDDigest("s1.a"), IDDigest("s1.b"), IDDigest("s1.c")
	if err := r.Revoke(a, "alice", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := r.Revoke(IDDigest("s1.expired"), "alice", now.Add(-time.Minute)); err != nil || r.Len() != 1 {
		t.Fatalf("an expired session's deletion: %v, len %d", err, r.Len())
	}
	if err := r.Revoke(b, "alice", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !r.Revoked(a) || r.Len() != 2 || r.Watching() || r.Pending() != 0 {
		t.Fatalf("len %d, watching %v, pending %d", r.Len(), r.Watching(), r.Pending())
	}
	now = now.Add(2 * time.Minute)
	if err := r.Revoke(c, "alice", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if r.Revoked(a) || !r.Revoked(b) || r.Len() != 2 {
		t.Fatalf("after expiry: a %v, b %v, len %d", r.Revoked(a), r.Revoked(b), r.Len())
	}
	if r.Revoked("not a digest") {
		t.Fatal("a malformed digest reads as revoked")
	}
}

// TestRevocationBounds: what one replica records itself is bounded per
// principal and in total; a refused deletion records nothing; expired
// ones make room again.
func TestRevocationBounds(t *testing.T) {
	r := NewRevocations(nil, RevocationLimits{Total: 3, PerPrincipal: 2}, slog.New(slog.DiscardHandler))
	defer r.Close(context.Background())
	now := time.Now()
	r.now = func() time.Time { return now }
	id := func(n int) string { return IDDigest(fmt.Sprintf("s1.%d", n)) }
	for i := range 2 {
		if err := r.Revoke(id(i), "alice", now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Revoke(id(2), "alice", now.Add(time.Hour)); !errors.Is(err, ErrPrincipalDeletedLimit) || r.Revoked(id(2)) {
		t.Fatalf("alice's third deletion: %v", err)
	}
	if err := r.Revoke(id(0), "alice", now.Add(time.Minute)); err != nil {
		t.Fatalf("deleting a deleted session again: %v", err)
	}
	if err := r.Revoke(id(3), "bob", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := r.Revoke(id(4), "carol", now.Add(time.Hour)); !errors.Is(err, ErrTooManyDeleted) || r.Revoked(id(4)) {
		t.Fatalf("past the total: %v", err)
	}
	now = now.Add(2 * time.Minute)
	if err := r.Revoke(id(4), "carol", now.Add(time.Hour)); err != nil {
		t.Fatalf("after alice's expired: %v", err)
	}
	if err := r.Revoke(id(5), "alice", now.Add(time.Hour)); err != nil {
		t.Fatalf("alice after hers expired: %v", err)
	}
}
