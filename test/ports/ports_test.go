package ports

import (
	"net"
	"strconv"
	"testing"
)

// Free hands out distinct ports that are free, and keeps them out of
// the kernel's ephemeral range, where a released port can be handed to a
// listener on port 0 before the process meant for it starts.
func TestFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	top := ephemeralLow()
	for range 200 {
		p, err := Free()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if top > 11000 && p >= top {
			t.Fatalf("port %d is inside the ephemeral range starting at %d", p, top)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		_ = l.Close()
	}
}
