// Package ports chooses loopback ports for the processes a test or the
// load harness starts.
package ports

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports handed out by Free in this process.
var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// Free returns a loopback port that is free now, for a process to listen
// on soon after, and never the same one twice in this process. It
// comes from below the kernel's ephemeral range: a port from inside it,
// released again, can be handed to anything listening on port 0 or
// connecting out in the meantime, and a test's backend once got the port
// chosen for its gateway that way.
func Free() (int, error) {
	const lowest = 10000
	top := ephemeralLow()
	portsMu.Lock()
	defer portsMu.Unlock()
	if top-lowest >= 1000 {
		for range 1000 {
			p := lowest + rand.IntN(top-lowest)
			if portsGiven[p] {
				continue
			}
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				continue
			}
			_ = l.Close()
			portsGiven[p] = true
			return p, nil
		}
	}
	// No room below the range: the kernel's choice, still never repeated.
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !portsGiven[p] {
			portsGiven[p] = true
			return p, nil
		}
	}
	return 0, errors.New("ports: no free loopback port")
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768
}

// FreeN returns n distinct ports, as Free does.
func FreeN(n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		p, err := Free()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
