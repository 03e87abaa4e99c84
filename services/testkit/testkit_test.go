package testkit

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// fatalTB keeps the failure Eventually reports instead of failing.
type fatalTB struct {
	testing.TB
	failed string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure is the failure run reports.
func failure(t *testing.T, run func(testing.TB)) string {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); run(tb) }()
	<-done
	return tb.failed
}

// Eventually reports how long the condition took; on timeout it names
// what it waited for, the deadline and the condition's last error.
func TestEventually(t *testing.T) {
	n := 0
	if took := Eventually(t, "the third poll", time.Second, func() bool { n++; return n == 3 }); took <= 0 || n != 3 {
		t.Errorf("took %v, %d polls", took, n)
	}
	if got := failure(t, func(tb testing.TB) { Eventually(tb, "x", 20*time.Millisecond, func() bool { return false }) }); got != "x: not within 20ms" {
		t.Errorf("failure %q", got)
	}
	if got := failure(t, func(tb testing.TB) {
		Eventually(tb, "x", 20*time.Millisecond, func() error { return errors.New("down") })
	}); got != "x: not within 20ms: down" {
		t.Errorf("failure %q", got)
	}
}
