package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. It
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// selfPid is the load client's own process, whose CPU time is reported
// beside the services'.
var selfPid = os.Getpid()

// RSS returns the resident set size (VmRSS) of process pid in bytes.
func RSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(v)
			if len(fields) != 2 || fields[1] != "kB" {
				return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			return kb << 10, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// procStat is what the harness reads from /proc/PID/stat.
type procStat struct {
	Comm string
	PPid int
	// CPU is utime + stime; Children is cutime + cstime, the CPU time of
	// the children the process has waited for.
	CPU, Children time.Duration
}

// readStat parses /proc/PID/stat.
func readStat(pid int) (procStat, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(raw))
}

// parseStat parses the text of a /proc/PID/stat file.
func parseStat(s string) (procStat, error) {
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses; the fields after its last closing parenthesis are
	// plain.
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, errors.New("malformed stat: no command name")
	}
	fields := strings.Fields(s[end+1:])
	// fields[0] is field 3 (state), fields[1] field 4 (ppid); utime,
	// stime, cutime and cstime are fields 14 to 17.
	if len(fields) < 15 {
		return procStat{}, errors.New("malformed stat: too few fields")
	}
	var n [5]int64
	for i, f := range []int{1, 11, 12, 13, 14} {
		v, err := strconv.ParseInt(fields[f], 10, 64)
		if err != nil || v < 0 {
			return procStat{}, fmt.Errorf("malformed stat: field %d is %q", f+3, fields[f])
		}
		n[i] = v
	}
	tick := func(v int64) time.Duration { return time.Duration(v) * time.Second / clockTicks }
	return procStat{Comm: s[open+1 : end], PPid: int(n[0]), CPU: tick(n[1] + n[2]), Children: tick(n[3] + n[4])}, nil
}

// CPUTime returns the user plus system CPU time process pid has used.
func CPUTime(pid int) (time.Duration, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return st.CPU, nil
}

// Goroutines scrapes go_goroutines from a Prometheus text endpoint.
func Goroutines(ctx context.Context, metricsURL string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", metricsURL, resp.Status)
	}
	return metricValue(bufio.NewScanner(resp.Body), "go_goroutines")
}

// metricValue finds an unlabelled sample of name in Prometheus text format.
func metricValue(sc *bufio.Scanner, name string) (float64, error) {
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || !strings.HasPrefix(rest, " ") {
			continue
		}
		fields := strings.Fields(rest)
		return strconv.ParseFloat(fields[0], 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s sample", name)
}

// LoadAverage returns the 1, 5 and 15 minute load averages as written in
// /proc/loadavg.
func LoadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// RSSSampler records the peak RSS of a set of processes, sampled on an
// interval until stopped.
type RSSSampler struct {
	peak map[*Proc]int64
	stop chan struct{}
	done chan struct{}
}

// SampleRSS starts sampling procs every interval.
func SampleRSS(procs []*Proc, interval time.Duration) *RSSSampler {
	s := &RSSSampler{peak: map[*Proc]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	sample := func() {
		for _, p := range procs {
			if v, err := RSS(p.Pid()); err == nil && v > s.peak[p] {
				s.peak[p] = v
			}
		}
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		sample()
		for {
			select {
			case <-s.stop:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return s
}

// Stop ends sampling and returns the peak RSS of each process.
func (s *RSSSampler) Stop() map[*Proc]int64 {
	close(s.stop)
	<-s.done
	return s.peak
}
