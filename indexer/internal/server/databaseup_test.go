package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchboard-mcp/switchboard/services/testkit"
)

type flakyDB struct{ down atomic.Bool }

func (d *flakyDB) Ping(context.Context) error {
	if d.down.Load() {
		return errors.New("connection refused")
	}
	return nil
}

// TestWatchDatabase: the gauge follows whether the database answers.
func TestWatchDatabase(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	db := &flakyDB{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { m.WatchDatabase(ctx, db, 5*time.Millisecond); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for _, want := range []float64{1, 0, 1} {
		db.down.Store(want == 0)
		testkit.Eventually(t, "database_up to follow the database", 5*time.Second, func() bool {
			return testutil.ToFloat64(m.databaseUp) == want
		})
	}
}
