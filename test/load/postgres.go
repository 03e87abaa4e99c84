package load

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// PostgresServer is the PostgreSQL server of a run: the postmaster and the
// server processes it forks (one per connection, plus its background
// workers). find_tool's CPU per query includes theirs.
type PostgresServer struct {
	// Pid is the postmaster's.
	Pid int
}

// FindPostgresServer finds the postmaster among the children of parent
// (the harness starts it).
func FindPostgresServer(parent int) (*PostgresServer, error) {
	var found []int
	err := eachProcess(func(pid int, st procStat) {
		if st.PPid == parent && st.Comm == "postgres" {
			found = append(found, pid)
		}
	})
	if err != nil {
		return nil, err
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("want one postgres child of process %d, found %d", parent, len(found))
	}
	return &PostgresServer{Pid: found[0]}, nil
}

// CPUTime is the CPU time of the postmaster and its children (TreeCPU): a
// connection's process that ended during a run still counts.
func (p *PostgresServer) CPUTime() (time.Duration, error) {
	total, err := TreeCPU(p.Pid)
	if err != nil {
		return 0, fmt.Errorf("postmaster %d: %w", p.Pid, err)
	}
	return total, nil
}

// TreeCPU is the CPU time of process pid, of its live children and of the
// children it has reaped (its cutime and cstime).
func TreeCPU(pid int) (time.Duration, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	total := st.CPU + st.Children
	err = eachProcess(func(_ int, child procStat) {
		if child.PPid == pid {
			total += child.CPU
		}
	})
	return total, err
}

// eachProcess calls f with every process whose stat it can read; a
// process that ends while the list is read is skipped.
func eachProcess(f func(pid int, st procStat)) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		st, err := readStat(pid)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue
		}
		if err != nil {
			return err
		}
		f(pid, st)
	}
	return nil
}
