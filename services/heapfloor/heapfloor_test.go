package heapfloor

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// gcPercent is the runtime's current GOGC.
func gcPercent() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func gcCycles() uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.NumGC
}

var sink []byte

// churn allocates n bytes of garbage, a request's worth at a time.
func churn(n int) {
	for i := 0; i < n; i += 16 << 10 {
		sink = make([]byte, 16<<10)
	}
}

// goDefaults gives the test Go's own pacing, whatever GOGC and GOMEMLIMIT
// the test process started with, and restores them after it.
func goDefaults(t *testing.T) {
	t.Setenv("GOGC", "")
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	percent := debug.SetGCPercent(defaultPercent)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
}

// waitPercent polls until the runtime's GOGC satisfies ok: the tuner runs
// in a finalizer after a cycle, or on its backstop.
func waitPercent(t *testing.T, what string, ok func(uint64) bool) {
	t.Helper()
	testkit.Eventually(t, what, 10*time.Second, func() error {
		runtime.GC()
		if p := gcPercent(); !ok(p) {
			return fmt.Errorf("GOGC %d", p)
		}
		return nil
	})
}

// TestFloorCutsCycles: with a small live heap, a 64 MiB floor puts the
// goal at 64 MiB, so 256 MiB of garbage takes a handful of cycles instead
// of Go's dozens; stop restores Go's default.
func TestFloorCutsCycles(t *testing.T) {
	goDefaults(t)
	runtime.GC()
	before := gcCycles()
	churn(256 << 20)
	without := gcCycles() - before

	stop, reason := Start(64 << 20)
	if reason != "" {
		t.Fatalf("Start: %s", reason)
	}
	waitPercent(t, "a GOGC above Go's under a 64 MiB floor with a small heap", func(p uint64) bool { return p > defaultPercent })
	// The goal is the floor, not more: the runtime's own minimum grows
	// with the percentage too.
	if goal := heapGoal(); goal < 60<<20 || goal > 68<<20 {
		t.Errorf("heap goal %d MiB under a 64 MiB floor", goal>>20)
	}
	before = gcCycles()
	churn(256 << 20)
	with := gcCycles() - before
	stop()
	if p := gcPercent(); p != defaultPercent {
		t.Errorf("GOGC %d after stop, want %d", p, defaultPercent)
	}
	t.Logf("cycles for 256 MiB of garbage: %d at Go's default, %d with a 64 MiB floor", without, with)
	if with > 12 || with*3 > without {
		t.Errorf("cycles with the floor %d, without %d: want at most 12 and a third", with, without)
	}
}

// TestLargeLiveHeapKeepsTheDefault: once the live heap is half the floor
// or more, the percentage is Go's own.
func TestLargeLiveHeapKeepsTheDefault(t *testing.T) {
	goDefaults(t)
	stop, _ := Start(64 << 20)
	defer stop()
	waitPercent(t, "a GOGC above Go's with a small heap", func(p uint64) bool { return p > defaultPercent })
	live := make([]byte, 48<<20)
	waitPercent(t, "Go's GOGC with 48 MiB live under a 64 MiB floor", func(p uint64) bool { return p == defaultPercent })
	runtime.KeepAlive(live)
}

// TestOperatorsChoiceWins: GOGC in the environment, or a floor of 0,
// leaves the runtime alone.
func TestOperatorsChoiceWins(t *testing.T) {
	goDefaults(t)
	t.Setenv("GOGC", "200")
	if _, reason := Start(64 << 20); reason != "GOGC is set" {
		t.Errorf("with GOGC set: reason %q", reason)
	}
	if _, reason := Start(0); reason == "" {
		t.Error("a floor of 0 started the tuner")
	}
	if p := gcPercent(); p != defaultPercent {
		t.Errorf("GOGC %d, want it left at %d", p, defaultPercent)
	}
}

// TestStopWins: a stop that races with the tuner's adjustments leaves
// Go's default in place.
func TestStopWins(t *testing.T) {
	goDefaults(t)
	for range 50 {
		stop, _ := Start(64 << 20)
		go runtime.GC()
		stop()
		runtime.GC()
		runtime.GC()
		if p := gcPercent(); p != defaultPercent {
			t.Fatalf("GOGC %d after stop, want %d", p, defaultPercent)
		}
	}
}
