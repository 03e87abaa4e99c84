// Package heapfloor keeps a service's heap goal at or above a floor.
//
// Go's collector starts a cycle when the heap has grown by GOGC per cent
// (100) over what the last cycle found live. The services keep little
// alive (tens of MiB) and allocate for every request, so at Go's default
// a replica under load collects dozens of times a second, and the
// collector's work is a large share of the CPU a call costs (profile
// under make bench-profile). Raising GOGC for good would multiply the heap
// of an aggregator holding a large catalog as well; a floor costs about
// the floor. After each cycle the tuner sets the GC percentage that puts
// the next goal at the floor, and Go's default once the live heap alone
// reaches half of it. The percentage follows the last cycle's live heap:
// when that grows several-fold in one cycle (a large catalog loaded), the
// goal passes the floor until the tuner runs after that cycle, or at the
// latest within a second. GOMEMLIMIT, when set, bounds the heap all along:
// the runtime collects earlier as the limit nears, whatever the percentage.
package heapfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// defaultPercent is Go's own GOGC, which the tuner never goes below.
const defaultPercent = 100

// runtimeHeapMinimum is the goal Go never goes below at GOGC=100 (4 MiB);
// it scales with the percentage, so the percentage that makes it the
// floor is also the most the floor asks for.
const runtimeHeapMinimum = 4 << 20

// backstop is how often the tuner adjusts besides after each cycle: the
// finalizer that runs it after a cycle waits behind any other finalizer.
const backstop = time.Second

// Start keeps the heap goal at floor bytes or more until stop is called,
// which restores Go's default. It does nothing, and says why in reason,
// when floor is 0 or GOGC is set in the environment (the operator chose;
// an empty GOGC is Go's default, and the floor applies).
func Start(floor uint64) (stop func(), reason string) {
	if floor == 0 {
		return func() {}, "ops.heapFloorMiB is 0"
	}
	if os.Getenv("GOGC") != "" {
		return func() {}, "GOGC is set"
	}
	t := &tuner{floor: floor, done: make(chan struct{})}
	t.adjust()
	t.arm()
	go t.tick()
	return t.stop, ""
}

type tuner struct {
	floor uint64
	done  chan struct{}
	// mu orders adjustments (after a cycle, by the backstop) with stop:
	// none sets a percentage once stop has restored Go's.
	mu      sync.Mutex
	stopped bool
	// samples are the collector's own figures of the last cycle: what it
	// found live and scanned besides the heap, which count towards the
	// next goal too.
	samples [3]metrics.Sample
	percent int
}

func (t *tuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	close(t.done)
	debug.SetGCPercent(defaultPercent)
}

// sentinel is garbage made for its finalizer, which runs once a cycle has
// found it unreachable: after every cycle, as each run makes the next one.
// It holds a pointer so that it is never a tiny allocation, whose
// finalizers may not run.
type sentinel struct{ _ *int }

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if t.adjust() {
			t.arm()
		}
	})
}

func (t *tuner) tick() {
	ticker := time.NewTicker(backstop)
	defer ticker.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-ticker.C:
			t.adjust()
		}
	}
}

// adjust sets the percentage for the next cycle, and reports false once
// the tuner has stopped. The runtime's goal is live + (live + stacks +
// globals) × percent / 100, solved here for the floor, but never less
// than 4 MiB × percent / 100, which caps it.
func (t *tuner) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	t.samples[0].Name = "/gc/heap/live:bytes"
	t.samples[1].Name = "/gc/scan/stack:bytes"
	t.samples[2].Name = "/gc/scan/globals:bytes"
	metrics.Read(t.samples[:])
	live := t.samples[0].Value.Uint64()
	scanned := live + t.samples[1].Value.Uint64() + t.samples[2].Value.Uint64()
	percent := defaultPercent
	if live < t.floor && scanned > 0 {
		percent = int(min((t.floor-live)*100/scanned, t.floor*100/runtimeHeapMinimum))
	}
	percent = max(percent, defaultPercent)
	if percent != t.percent {
		t.percent = percent
		debug.SetGCPercent(percent)
	}
	return true
}
