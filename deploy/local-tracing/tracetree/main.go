// Command tracetree prints the spans that the local collector's debug
// exporter logged (deploy/local-tracing/collector.yaml, verbosity
// detailed) as one tree per trace, so that one MCP request reads as
// gateway → aggregator → backend and gateway → indexer → PostgreSQL.
//
//	.bin/otelcol-switchboard --config deploy/local-tracing/collector.yaml 2>&1 | tee spans.log
//	cd deploy/local-tracing/tracetree && GOWORK=off go run . [-trace ID] [-name tools/call] < spans.log
package main

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// span is one span as the debug exporter prints it.
type span struct {
	service, trace, parent, id, name, kind string
	start, end                             time.Time
}

const timeLayout = "2006-01-02 15:04:05.999999999 -0700 MST"

// parse reads the debug exporter's detailed output. It keys on the
// exporter's fixed field labels and ignores everything else (log lines,
// attributes, events).
func parse(r io.Reader) ([]*span, error) {
	var spans []*span
	var service string
	var cur *span
	inResource := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Resource attributes:"):
			inResource = true
			continue
		case strings.HasPrefix(line, "ScopeSpans #"):
			inResource = false
			continue
		}
		if inResource {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "-> service.name: Str("); ok {
				service = strings.TrimSuffix(v, ")")
			}
			continue
		}
		label, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch strings.TrimSpace(label) {
		case "Trace ID":
			cur = &span{service: service, trace: value}
			spans = append(spans, cur)
		case "Parent ID":
			if cur != nil {
				cur.parent = value
			}
		case "ID":
			if cur != nil {
				cur.id = value
			}
		case "Name":
			if cur != nil {
				cur.name = value
			}
		case "Kind":
			if cur != nil {
				cur.kind = value
			}
		case "Start time", "End time":
			if cur == nil {
				continue
			}
			t, err := time.Parse(timeLayout, value)
			if err != nil {
				return nil, fmt.Errorf("span %s: %s %q: %w", cur.id, label, value, err)
			}
			if strings.TrimSpace(label) == "Start time" {
				cur.start = t
			} else {
				cur.end = t
			}
		}
	}
	return spans, sc.Err()
}

// render writes one tree per trace, oldest first; children are ordered by
// start time and indented under their parent. Traces are kept when traceID
// is empty or equal, and when rootName is empty or names a span of the
// trace without a parent in it.
func render(w io.Writer, spans []*span, traceID, rootName string) {
	byTrace := map[string][]*span{}
	for _, s := range spans {
		byTrace[s.trace] = append(byTrace[s.trace], s)
	}
	type tree struct {
		id    string
		roots []*span
		kids  map[string][]*span
		start time.Time
	}
	var trees []tree
	for id, ss := range byTrace {
		if traceID != "" && id != traceID {
			continue
		}
		ids := map[string]bool{}
		for _, s := range ss {
			ids[s.id] = true
		}
		t := tree{id: id, kids: map[string][]*span{}, start: ss[0].start}
		for _, s := range ss {
			if ids[s.parent] {
				t.kids[s.parent] = append(t.kids[s.parent], s)
			} else {
				t.roots = append(t.roots, s)
			}
			if s.start.Before(t.start) {
				t.start = s.start
			}
		}
		if rootName != "" && !slices.ContainsFunc(t.roots, func(s *span) bool { return named(s.name, rootName) }) {
			continue
		}
		trees = append(trees, t)
	}
	slices.SortFunc(trees, func(a, b tree) int { return a.start.Compare(b.start) })
	byStart := func(a, b *span) int { return cmp.Or(a.start.Compare(b.start), strings.Compare(a.id, b.id)) }
	for _, t := range trees {
		fmt.Fprintf(w, "trace %s\n", t.id)
		var walk func(ss []*span, depth int)
		walk = func(ss []*span, depth int) {
			slices.SortFunc(ss, byStart)
			for _, s := range ss {
				fmt.Fprintf(w, "%s%s  [%s %s] %s\n", strings.Repeat("  ", depth+1), s.name, s.service, strings.ToLower(s.kind),
					s.end.Sub(s.start).Round(10*time.Microsecond))
				walk(t.kids[s.id], depth+1)
			}
		}
		walk(t.roots, 0)
	}
}

func main() {
	traceID := flag.String("trace", "", "show only this trace id")
	rootName := flag.String("name", "", "show only traces whose root span has this name, or this method (e.g. tools/call, or tools/call weather_forecast)")
	flag.Parse()
	spans, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracetree:", err)
		os.Exit(1)
	}
	render(os.Stdout, spans, *traceID, *rootName)
}

// named reports whether a span's name is want, or is want's method with
// its target ("tools/call weather_forecast" for tools/call), as the MCP
// conventions name spans.
func named(name, want string) bool {
	return name == want || strings.HasPrefix(name, want+" ")
}
