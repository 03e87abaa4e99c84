package postgres_test

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest/pgtest"
)

var env *pgtest.Env

func TestMain(m *testing.M) { pgtest.Main(m, &env) }

// backing is one fresh database of the test cluster.
type backing struct{ url string }

func (b backing) Open(t *testing.T) store.Store { return env.Open(t, b.url) }

func (b backing) AgeScope(t *testing.T, digest string, age time.Duration) {
	st := env.Open(t, b.url)
	tag, err := st.Pool().Exec(t.Context(), `UPDATE scopes SET last_used_at = now() - make_interval(secs => $2) WHERE tools_digest = $1`, postgres.ScopeKey(digest), age.Seconds())
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("age scope %s: %v (%d rows)", digest, err, tag.RowsAffected())
	}
}

// The PostgreSQL store keeps the store contract.
func TestContract(t *testing.T) {
	storetest.RunAll(t, func(t *testing.T) storetest.Backing { return backing{url: env.NewDatabase(t)} })
}

// It keeps the audit trail's too.
func TestAuditEventsContract(t *testing.T) {
	storetest.RunAuditEvents(t, func(t *testing.T) storetest.Open[store.AuditEvents] {
		url := env.NewDatabase(t)
		return func(t *testing.T) store.AuditEvents { return env.Open(t, url) }
	})
}
