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
