package heapfloor

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
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

// TestFloorCutsCycles: with a small live heap, a 64 MiB floor makes
// 256 MiB of garbage take a handful of cycles instead of Go's dozens, and
// stop restores Go's default.
func TestFloorCutsCycles(t *testing.T) {
	unsetGOGC(t)
	runtime.GC()
	before := gcCycles()
	churn(256 << 20)
	without := gcCycles() - before

	stop, reason := Start(64 << 20)
	if reason != "" {
		t.Fatalf("Start: %s", reason)
	}
	runtime.GC()
	runtime.GC() // the finalizer of the first cycle has run once the second starts
	if p := gcPercent(); p <= defaultPercent {
		t.Fatalf("GOGC %d under a 64 MiB floor with a small heap, want more than %d", p, defaultPercent)
	}
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
	unsetGOGC(t)
	live := make([]byte, 48<<20)
	stop, _ := Start(64 << 20)
	defer stop()
	runtime.GC()
	runtime.GC()
	runtime.GC()
	if p := gcPercent(); p != defaultPercent {
		t.Errorf("GOGC %d with 48 MiB live under a 64 MiB floor, want %d", p, defaultPercent)
	}
	runtime.KeepAlive(live)
}

// TestOperatorsChoiceWins: GOGC in the environment, or a floor of 0,
// leaves the runtime alone.
func TestOperatorsChoiceWins(t *testing.T) {
	t.Setenv("GOGC", "200")
	was := gcPercent()
	if _, reason := Start(64 << 20); reason != "GOGC is set" {
		t.Errorf("with GOGC set: reason %q", reason)
	}
	if _, reason := Start(0); reason == "" {
		t.Error("a floor of 0 started the tuner")
	}
	if p := gcPercent(); p != was {
		t.Errorf("GOGC %d, want it left at %d", p, was)
	}
}

// unsetGOGC removes GOGC from the environment for the test.
func unsetGOGC(t *testing.T) {
	t.Setenv("GOGC", "")
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
}
