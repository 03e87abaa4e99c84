package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestIndexerServesOnlyAfterMigrations starts the indexer process while its
// PostgreSQL is down: its gRPC health must answer NOT_SERVING, and turn
// SERVING only once PostgreSQL is back and the migrations have created the
// schema.
func TestIndexerServesOnlyAfterMigrations(t *testing.T) {
	pg := harness.StartPostgres(t)
	dbURL := harness.CreateDatabase(t, pg)
	if err := pg.StopServer(t.Context()); err != nil {
		t.Fatal(err)
	}

	cfg := &config.Config{
		ServiceAuth: config.ServiceAuth{Credentials: []config.ServiceCredential{{Name: "test", Token: "t0ken-for-this-test", AssertPrincipals: true, Allow: harness.AllMethods}}},
		Logging:     config.Logging{Level: "debug", Format: "text"},
	}
	cfg.Indexer.Listen = harness.FreeAddr(t)
	cfg.Indexer.Database = dbURL
	// Nothing listens there: the indexer needs no aggregator to migrate.
	cfg.Indexer.Aggregator = config.Endpoint{Address: harness.FreeAddr(t), Token: "t0ken-for-this-test"}
	path := harness.WriteConfig(t, t.TempDir(), cfg)

	health := func(ctx context.Context) (grpc_health_v1.HealthCheckResponse_ServingStatus, error) {
		return devstack.GRPCHealth(ctx, cfg.Indexer.Listen, cfg.ServiceAuth.TLS)
	}
	// Ready, for the harness, means the health service answers at all.
	indexer := harness.StartProc(t, "indexer", devstack.IndexerBin, []string{"--config", path}, nil,
		func(ctx context.Context) error { _, err := health(ctx); return err })

	st, err := health(t.Context())
	if err != nil || st != grpc_health_v1.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health with PostgreSQL down = %v, %v; want NOT_SERVING", st, err)
	}

	if err := pg.StartServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), harness.ReadyTimeout)
	defer cancel()
	if err := devstack.WaitReady(ctx, nil, devstack.GRPCServing(cfg.Indexer.Listen, cfg.ServiceAuth.TLS)); err != nil {
		t.Fatalf("indexer never became SERVING after PostgreSQL came back: %v", err)
	}
	if n := schemaTables(t, dbURL); n == 0 {
		t.Fatal("the indexer reports SERVING but its database has no tables: migrations were not applied")
	}
	if !indexer.Running() {
		t.Fatal("the indexer exited")
	}
}

// schemaTables counts the tables outside PostgreSQL's own schemas.
func schemaTables(t *testing.T, dbURL string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema NOT IN ('pg_catalog', 'information_schema')`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
