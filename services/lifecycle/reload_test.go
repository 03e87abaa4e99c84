package lifecycle

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestReloadMetricsCountByResult(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewReloadMetrics(reg)
	started := testutil.ToFloat64(m.lastSuccess)
	if started <= 0 {
		t.Fatalf("last success at start = %v, want the start's time", started)
	}
	at := time.Unix(2000000000, 500000000)
	m.Observe(false, at.Add(-time.Minute))
	m.Observe(true, at)
	m.Observe(false, at.Add(time.Minute))
	if ok, rejected := testutil.ToFloat64(m.reloads.WithLabelValues("ok")), testutil.ToFloat64(m.reloads.WithLabelValues("rejected")); ok != 1 || rejected != 2 {
		t.Fatalf("reloads ok %v rejected %v, want 1 and 2", ok, rejected)
	}
	if got := testutil.ToFloat64(m.lastSuccess); got != 2000000000.5 {
		t.Fatalf("last success = %v, want the successful reload's time", got)
	}
	if n, err := testutil.GatherAndCount(reg, "switchboard_config_reloads_total", "switchboard_config_last_reload_success_timestamp_seconds"); err != nil || n != 3 {
		t.Fatalf("registered series: %d %v, want 3", n, err)
	}
}
