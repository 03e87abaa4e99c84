package edge

import (
	"bytes"
	"errors"
	"testing"
	"testing/iotest"
)

// TestReadAll reads bodies of every size whole, declared or not, and
// declared too short or too long, and sizes the buffer of a declared body
// exactly.
func TestReadAll(t *testing.T) {
	for _, n := range []int{0, 1, 16<<10 - 1, 16 << 10, 16<<10 + 1, 1 << 20, 3<<20 + 7} {
		body := bytes.Repeat([]byte("b"), n)
		for _, declared := range []int64{-1, int64(n), int64(n) / 2, int64(n) * 2} {
			got, err := readAll(iotest.HalfReader(bytes.NewReader(body)), declared)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("n %d, declared %d: %d bytes, %v", n, declared, len(got), err)
			}
			if declared == int64(n) && cap(got) > n+1 {
				t.Errorf("n %d declared: capacity %d", n, cap(got))
			}
		}
	}
	if _, err := readAll(iotest.ErrReader(errors.New("broken")), 10); err == nil {
		t.Error("a read error was lost")
	}
}
