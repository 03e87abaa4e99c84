// Package pgtest gives tests a real PostgreSQL: one throwaway cluster per
// test binary, a template database migrated once, and a fresh database
// cloned from the template for each test.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/services/pgcluster"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
)

const templateName = "indexer_template"

// Env is a cluster with a migrated template database.
type Env struct {
	Cluster *pgcluster.Cluster
	next    atomic.Int64
}

// Setup starts the cluster and migrates the template. Call it from
// TestMain and Stop the result when the tests are done.
func Setup(ctx context.Context, opts pgcluster.Options) (*Env, error) {
	c, err := pgcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := c.CreateDatabase(ctx, templateName); err != nil {
		_ = c.Stop()
		return nil, err
	}
	st, err := postgres.Open(ctx, c.URL(templateName), postgres.Options{})
	if err == nil {
		_, err = st.Migrate(ctx)
		// The template must have no connections left when it is cloned.
		st.Close()
	}
	if err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("migrate template: %w", err)
	}
	return &Env{Cluster: c}, nil
}

// Main is a test package's TestMain: it sets *env to a fresh cluster, runs
// the tests and removes the cluster. A cluster that cannot start fails the
// package (exit 1): tests that need PostgreSQL never skip.
func Main(m *testing.M, env **Env) {
	e, err := Setup(context.Background(), pgcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "PostgreSQL for tests:", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// Stop removes the cluster.
func (e *Env) Stop() error { return e.Cluster.Stop() }

// NewDatabase clones the migrated template into a new database and
// returns its URL.
func (e *Env) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", e.next.Add(1))
	conn, err := pgx.Connect(t.Context(), e.Cluster.URL("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	if _, err := conn.Exec(t.Context(), "CREATE DATABASE "+name+" TEMPLATE "+templateName); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return e.Cluster.URL(name)
}

// OpenStore opens a store on a fresh database, closed at cleanup.
func (e *Env) OpenStore(t testing.TB) *postgres.Store {
	t.Helper()
	return e.Open(t, e.NewDatabase(t))
}

// Open opens a store on the database at url, closed at cleanup.
func (e *Env) Open(t testing.TB, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}
