package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A request state is consumed once: of many concurrent consumers on
// several handles (replicas), exactly one is first, and every later call
// is not; another digest is independent; garbage collection purges the
// expired records only; a release gives one use back.
func requestStates(t *testing.T, open Open[RequestStateStore]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	in := time.Now().Add(time.Hour)
	var firsts atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		st := one
		if i%2 == 1 {
			st = two
		}
		wg.Go(func() {
			first, err := st.ConsumeRequestState(ctx, digest('a'), in)
			if err != nil {
				t.Error(err)
			}
			if first {
				firsts.Add(1)
			}
		})
	}
	wg.Wait()
	if n := firsts.Load(); n != 1 {
		t.Fatalf("%d concurrent consumers were first, want exactly 1", n)
	}
	if first, err := two.ConsumeRequestState(ctx, digest('a'), in); err != nil || first {
		t.Fatalf("a later use: first %v, %v", first, err)
	}
	if first, err := one.ConsumeRequestState(ctx, digest('b'), in); err != nil || !first {
		t.Fatalf("another digest: first %v, %v", first, err)
	}
	if first, err := one.ConsumeRequestState(ctx, digest('c'), time.Now().Add(-time.Minute)); err != nil || !first {
		t.Fatalf("an expired record: first %v, %v", first, err)
	}
	collected, err := one.CollectGarbage(ctx, time.Hour)
	if err != nil || collected.RequestStates != 1 {
		t.Fatalf("collected %+v (%v), want the one expired request state", collected, err)
	}
	if first, err := one.ConsumeRequestState(ctx, digest('b'), in); err != nil || first {
		t.Fatalf("a live record after garbage collection: first %v, %v", first, err)
	}
	// A released use is given back on every handle, once; releasing a
	// digest without a record changes nothing.
	if err := two.ReleaseRequestState(ctx, digest('b')); err != nil {
		t.Fatal(err)
	}
	if err := two.ReleaseRequestState(ctx, digest('d')); err != nil {
		t.Fatalf("releasing a digest without a record: %v", err)
	}
	if first, err := one.ConsumeRequestState(ctx, digest('b'), in); err != nil || !first {
		t.Fatalf("the use after a release: first %v, %v; want first", first, err)
	}
	if first, err := two.ConsumeRequestState(ctx, digest('b'), in); err != nil || first {
		t.Fatalf("a replay after the use that followed the release: first %v, %v", first, err)
	}
	if first, err := one.ConsumeRequestState(ctx, digest('a'), in); err != nil || first {
		t.Fatalf("releasing one digest gave back another: first %v, %v", first, err)
	}
}
