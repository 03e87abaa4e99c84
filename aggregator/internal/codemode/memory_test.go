package codemode

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// The watchdog's live heap leaves out what the program allocates while
// the collection runs: a program keeping 36 MiB and making garbage as
// fast as it can (on one core, as a runner has) reads as 36 MiB, never
// as the 70 MiB and more that counting its garbage made of it, which
// stopped programs far under a 64 MiB bound on a busy machine.
func TestLiveHeapLeavesOutGarbageMadeDuringTheCollection(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	keep := strings.Repeat("x", 36<<20)
	var sink atomic.Value
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			sink.Store(strings.Repeat("y", 256<<10))
		}
	}()
	var most int64
	for range 200 {
		most = max(most, liveHeapBytes())
		runtime.Gosched()
	}
	close(stop)
	<-done
	runtime.KeepAlive(keep)
	if most > int64(len(keep))+8<<20 {
		t.Fatalf("live heap read as %d MiB with %d MiB kept", most>>20, len(keep)>>20)
	}
}
