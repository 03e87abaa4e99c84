package load

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// resultsTitle heads a new results file.
const resultsTitle = `# Switchboard load results

Measured by ` + "`switchboard-load`" + ` (test/cmd/switchboard-load) against the real
cluster: demo backends, aggregator, indexer over a throwaway PostgreSQL and
gateway, each a separate process on loopback, driven by go-sdk v1.8.0 clients.
Each section below is rewritten by the command that produced it.
`

// Section names of the results file.
const (
	SectionBench = "bench"
	SectionSoak  = "soak"
)

func markers(section string) (begin, end string) {
	return "<!-- switchboard-load:" + section + ":begin -->", "<!-- switchboard-load:" + section + ":end -->"
}

// WriteSection replaces section in the Markdown file at path with body,
// keeping every other section, and creates the file when missing.
func WriteSection(path, section, body string) error {
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	doc := string(raw)
	if doc == "" {
		doc = resultsTitle
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(ReplaceSection(doc, section, body)), 0o644)
}

// ReplaceSection returns doc with section's body replaced, or appended
// when doc has no such section yet.
func ReplaceSection(doc, section, body string) string {
	begin, end := markers(section)
	block := begin + "\n" + strings.TrimSpace(body) + "\n" + end
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i >= 0 && j > i {
		return doc[:i] + block + doc[j+len(end):]
	}
	return strings.TrimRight(doc, "\n") + "\n\n" + block + "\n"
}

// msf formats a duration in milliseconds.
func msf(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// ratio formats a / b as "2.14×", or "–" when b is zero.
func ratio(a, b float64) string {
	switch {
	case b == 0:
		return "–"
	case a/b < 0.01:
		return "<0.01×"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// pairMs is "Switchboard / direct (ratio)" for durations in ms.
func pairMs(sb, direct time.Duration) string {
	return fmt.Sprintf("%s / %s (%s)", msf(sb), msf(direct), ratio(float64(sb), float64(direct)))
}

func mib(b int64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", float64(b)/(1<<20))
}

func kib(b int64) string {
	if b >= 1<<20 {
		return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
}

// MachineMarkdown describes the machine as a Markdown list.
func MachineMarkdown(m Machine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- Date: %s\n", m.Date.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "- CPU: %d × %s (nproc %d)\n", m.CPUs, m.CPUModel, m.CPUs)
	fmt.Fprintf(&b, "- Memory: %s; kernel %s\n", m.MemTotal, m.Kernel)
	fmt.Fprintf(&b, "- Go: %s", m.GoVersion)
	if m.Commit != "" {
		fmt.Fprintf(&b, "; Switchboard at `%s`", m.Commit)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "- Load average at start (1, 5, 15 min): %s. The machine is shared: client, services and backends compete for the same cores, and other work may run beside them.\n", m.LoadAvg)
	return b.String()
}

// BenchMarkdown renders a benchmark run.
func BenchMarkdown(r *BenchResults) string {
	var b strings.Builder
	o := r.Options
	b.WriteString("## Benchmarks (`make bench`)\n\n")
	b.WriteString(MachineMarkdown(r.Machine))
	fmt.Fprintf(&b, "- Run took %s. W1: %s per run, median of %d runs; W2: median of %d warm walks; W3: median of %d connects.\n\n",
		r.Took.Round(time.Second), o.CallDuration, max(o.Runs, 1), o.Walks, o.Connects)
	b.WriteString("Every cell is **through Switchboard / direct (ratio)**. \"Direct\" is the same go-sdk client doing the same thing against one demo backend without Switchboard. " +
		"Modern is go-sdk's default Connect (server/discover, 2026-07-28); Legacy pins `ProtocolVersion: \"2025-11-25\"` (initialize, session). " +
		"The harness checks the negotiated version, every tool result and every listed count.\n\n")
	b.WriteString("Reproduce: `make bench` (builds, then runs `switchboard-load bench --bin bin --out docs/load-results.md`). " +
		"`switchboard-load bench --call-duration 1s --runs 1 --walks 2 --connects 5 --small` is a one-minute smoke run.\n\n")

	b.WriteString("### W1: tools/call of an echo tool, 5 backends × 200 tools\n\n")
	fmt.Fprintf(&b, "Each client has its own session and calls back to back for %s (load avg: at the first run of the row); through Switchboard the calls rotate over all 1,000 tools of the 5 backends, directly over the 200 tools of the first backend. "+
		"Latency in ms. CPU per call is the CPU time (utime + stime) the processes used during the run divided by the calls completed; the backend figure through Switchboard is summed over the 5 backends.\n\n", o.CallDuration)
	b.WriteString("| Era | Clients | calls/s | p50 | p90 | p99 | errors | CPU/call: gateway, aggregator | CPU/call: backend | load avg |\n")
	b.WriteString("|---|---:|---|---|---|---|---|---:|---|---|\n")
	for _, p := range r.Calls {
		s, d := p.Switchboard, p.Direct
		fmt.Fprintf(&b, "| %s | %d | %.0f / %.0f (%s) | %s | %s | %s | %d / %d | %s, %s ms | %s / %s ms | %s |\n",
			p.Era, p.Concurrency, s.Rate(), d.Rate(), ratio(s.Rate(), d.Rate()),
			pairMs(s.P50, d.P50), pairMs(s.P90, d.P90), pairMs(s.P99, d.P99),
			s.Errors, d.Errors,
			msf(s.CPUPerCall("gateway")), msf(s.CPUPerCall("aggregator")),
			msf(s.CPUPerCall("backend")), msf(d.CPUPerCall("backend")),
			p.LoadAvg)
	}
	for _, p := range r.Calls {
		for _, side := range []struct {
			name string
			run  CallRun
		}{{"through Switchboard", p.Switchboard}, {"direct", p.Direct}} {
			if side.run.FirstError != "" {
				fmt.Fprintf(&b, "\nFirst error, %s c=%d %s: `%s`\n", p.Era, p.Concurrency, side.name, oneLine(side.run.FirstError))
			}
		}
	}

	b.WriteString("\n### W2: full tools/list walk over every page\n\n")
	fmt.Fprintf(&b, "A fresh cluster per catalog size and era. Cold is the first walk after the cluster started (on the first session); warm is the median of %d walks, each on a fresh session (connect not timed). "+
		"Repeat is a second walk on the first session: go-sdk answers it from its client-side list cache when the server advertised `ttlMs` (Modern), so it is what a long-lived client pays, not server work. "+
		"Direct walks one demo backend serving the same number of tools. Times in ms.\n\n", o.Walks)
	b.WriteString("| Tools | Era | pages | bytes | cold walk | warm walk | repeat walk, same session | load avg |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Catalogs {
		s, d := p.Switchboard, p.Direct
		fmt.Fprintf(&b, "| %s | %s | %d / %d | %s / %s | %s | %s | %s | %s |\n",
			catalogName(p.Topology), p.Era, s.ColdWalk.Pages, d.ColdWalk.Pages, kib(s.ColdWalk.Bytes), kib(d.ColdWalk.Bytes),
			pairMs(s.ColdWalk.Took, d.ColdWalk.Took), pairMs(s.WarmWalk(), d.WarmWalk()), pairMs(s.RepeatWalk, d.RepeatWalk), p.LoadAvg)
	}

	b.WriteString("\n### W3: connect cost\n\n")
	b.WriteString("Modern: `Connect` = one server/discover. Legacy: `Connect` = initialize + notifications/initialized (the session's GET stream opens after Connect returns and is not timed). " +
		"First is the first connect after the cluster started; then the median and p90 of fresh connects. Times in ms.\n\n")
	b.WriteString("| Tools | Era | first connect | median | p90 |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, p := range r.Catalogs {
		s, d := p.Switchboard, p.Direct
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", catalogName(p.Topology), p.Era,
			pairMs(s.ColdConnect, d.ColdConnect), pairMs(s.ConnectMedian(), d.ConnectMedian()), pairMs(s.ConnectP90(), d.ConnectP90()))
	}

	b.WriteString("\n### W4: resident memory (VmRSS, MiB)\n\n")
	top := o.Concurrency[len(o.Concurrency)-1]
	fmt.Fprintf(&b, "The W1 cluster: idle is right after it became ready; peak is the highest of samples every 250 ms during W1 through Switchboard at %d clients; "+
		"after is once all W1 runs ended. \"backend\" is the largest of the 5 demo backends; under direct load the first backend is the direct target.\n\n", top)
	fmt.Fprintf(&b, "| Process | idle | peak, Modern c=%d | peak, Legacy c=%d | after W1 |\n", top, top)
	b.WriteString("|---|---:|---:|---:|---:|\n")
	for _, m := range r.Memory {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", m.Process, mib(m.Idle), mib(m.Peak["Modern"]), mib(m.Peak["Legacy"]), mib(m.After))
	}
	if len(r.Catalogs) > 0 {
		b.WriteString("\nThe W2/W3 clusters, after their walks and connects:\n\n")
		b.WriteString("| Tools | Era | gateway | aggregator | indexer |\n|---|---|---:|---:|---:|\n")
		for _, p := range r.Catalogs {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", catalogName(p.Topology), p.Era, mib(p.RSS["gateway"]), mib(p.RSS["aggregator"]), mib(p.RSS["indexer"]))
		}
	}
	return b.String()
}

func catalogName(t Topology) string {
	return fmt.Sprintf("%s (%d × %d)", thousands(t.Tools()), t.Backends, t.ToolsPerBackend)
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return strings.ReplaceAll(s, "`", "'")
}
