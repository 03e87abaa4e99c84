package heapfloor

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// headroomPercent is the share of its container's memory limit a
// service's heap may take. Go counts only its own memory against a soft
// limit, and the kernel kills the process when the container passes the
// hard one, so the soft limit sits below it: what Go does not count (a
// stack, what the kernel keeps for the process) has room, as Go's own
// guidance asks.
const headroomPercent = 90

// SetMemoryLimit gives the runtime a soft memory limit of headroomPercent
// of the memory limit of the cgroup the process runs in (a container's),
// so that the collector works harder as the process nears it instead of
// the kernel killing it past it. It does nothing, and says why in reason,
// when GOMEMLIMIT is set (the operator chose) or no limit is found.
func SetMemoryLimit() (limit uint64, reason string) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, "GOMEMLIMIT is set"
	}
	container := cgroupMemoryLimit("/")
	if container == 0 {
		return 0, "no container memory limit"
	}
	limit = container / 100 * headroomPercent
	debug.SetMemoryLimit(int64(min(limit, 1<<62)))
	return limit, ""
}

// cgroupMemoryLimit is the memory limit of the process's cgroup under
// root (the file system's root, a directory in tests): cgroup v2's
// memory.max, else v1's memory.limit_in_bytes; 0 for none ("max", or
// v1's page-rounded maximum). A container's own cgroup is usually its
// namespace's root, which is looked at when the named path is not there.
func cgroupMemoryLimit(root string) uint64 {
	f, err := os.Open(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0
	}
	defer f.Close()
	var v2, v1 string
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(lines.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			v1 = parts[2]
		}
	}
	read := func(dir, path, file string) uint64 {
		for _, p := range []string{filepath.Join(root, dir, path, file), filepath.Join(root, dir, file)} {
			raw, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
			// "max", or v1's "no limit": the largest int64 rounded to a page.
			if err != nil || n >= 1<<62 {
				return 0
			}
			return n
		}
		return 0
	}
	if v1 == "" || v2 != "" {
		if n := read("sys/fs/cgroup", v2, "memory.max"); n > 0 {
			return n
		}
	}
	if v1 != "" {
		return read("sys/fs/cgroup/memory", v1, "memory.limit_in_bytes")
	}
	return 0
}
