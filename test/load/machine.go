package load

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where a run happened, so figures from different runs
// and from the reference system can be compared.
type Machine struct {
	CPUs      int
	CPUModel  string
	MemTotal  string
	Kernel    string
	GoVersion string
	Commit    string
	Date      time.Time
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute averages at the start.
	LoadAvg string
}

// DescribeMachine reads the machine's description from /proc.
func DescribeMachine() Machine {
	m := Machine{
		CPUs:      runtime.NumCPU(),
		CPUModel:  procField("/proc/cpuinfo", "model name"),
		MemTotal:  memTotal(),
		Kernel:    strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
		GoVersion: runtime.Version(),
		Commit:    gitCommit(),
		Date:      time.Now().UTC(),
		LoadAvg:   LoadAverage(),
	}
	return m
}

// procField returns the value of the first "key : value" line of path.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func memTotal() string {
	v := procField("/proc/meminfo", "MemTotal")
	kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	if err != nil {
		return v
	}
	return strconv.FormatFloat(float64(kb)/(1<<20), 'f', 1, 64) + " GiB"
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return string(b)
}

// gitCommit names the checkout the binaries were presumably built from;
// empty outside a git work tree.
func gitCommit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
