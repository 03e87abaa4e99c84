package heapfloor

import (
	"os"
	"path/filepath"
	"testing"
)

// cgroupMemoryLimit reads a container's limit under cgroup v2 and v1,
// from the process's own cgroup or, as in a container's namespace, the
// root; "max" and v1's unlimited value are no limit.
func TestCgroupMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		name   string
		cgroup string
		files  map[string]string
		want   uint64
	}{
		{"v2 in a namespace", "0::/\n", map[string]string{"sys/fs/cgroup/memory.max": "536870912\n"}, 512 << 20},
		{"v2 at its path", "0::/kubepods/pod1/c1\n", map[string]string{"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "1073741824\n"}, 1 << 30},
		{"v2 without a limit", "0::/\n", map[string]string{"sys/fs/cgroup/memory.max": "max\n"}, 0},
		{"v1", "9:name=systemd:/\n4:memory:/docker/abc\n0::/\n", map[string]string{"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "268435456\n"}, 256 << 20},
		{"v1 in a namespace", "4:cpu,memory:/docker/abc\n", map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "268435456\n"}, 256 << 20},
		{"v1 without a limit", "4:memory:/\n", map[string]string{"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0},
		{"no cgroup file", "", nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{}
			for k, v := range c.files {
				files[k] = v
			}
			if c.cgroup != "" {
				files["proc/self/cgroup"] = c.cgroup
			}
			for name, text := range files {
				path := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := cgroupMemoryLimit(root); got != c.want {
				t.Fatalf("limit %d, want %d", got, c.want)
			}
		})
	}
}

// An operator's GOMEMLIMIT is left as it is.
func TestSetMemoryLimitLeavesGOMEMLIMIT(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	if limit, reason := SetMemoryLimit(); limit != 0 || reason != "GOMEMLIMIT is set" {
		t.Fatalf("SetMemoryLimit = %d, %q", limit, reason)
	}
}
