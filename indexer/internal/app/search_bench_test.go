package app_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"

	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest"
)

// echoQueries are the find_tool texts of the load harness (test/load),
// asked of its synthetic echo catalog: every tool matches their words.
var echoQueries = []string{
	"synthetic echo tool", "echo tool number 42", "tool number 7", "echo the text back", "synthetic number 199",
}

// echoCatalog is the load harness's catalog: backends of synthetic echo
// tools, as the aggregator advertises them.
func echoCatalog(n int) []*aggregatorv1.Tool {
	tools := make([]*aggregatorv1.Tool, n)
	for i := range tools {
		tools[i] = &aggregatorv1.Tool{
			Name:            fmt.Sprintf("b%d__tool_%04d", i/200, i%200),
			Description:     fmt.Sprintf("Synthetic echo tool number %d.", i%200),
			InputSchemaJson: `{"type":"object"}`,
		}
	}
	return tools
}

func realisticCatalog(n int) []*aggregatorv1.Tool {
	var tools []*aggregatorv1.Tool
	for _, t := range storetest.SyntheticTools(n, 11) {
		tools = append(tools, &aggregatorv1.Tool{Name: t.Name, Description: t.Description, InputSchemaJson: t.InputSchemaJSON})
	}
	return tools
}

// BenchmarkSearchRPC measures one Search RPC end to end once the scope is
// built: gRPC client, the indexer's server, scope resolution and the
// ranking, against the fake aggregator over gRPC and a real PostgreSQL.
// Every principal sees the whole catalog; searches rotate over 100
// principals, so the figure includes whatever per-principal work a search
// does. The echo catalog is the load harness's, where every tool matches
// every query word; the realistic one has a varied vocabulary. With
// words=new every query carries a word never seen before, so each search
// asks PostgreSQL to stem it (words=cached: the indexer has stemmed every
// word already); with words=unheld that word is long enough for the
// search to look for the tools' lexemes one edit from it (fuzzy.go). Besides ns/op it reports the CPU per search of this
// process (client, indexer and fake aggregator together) and of the
// PostgreSQL backends serving the indexer.
func BenchmarkSearchRPC(b *testing.B) {
	for _, tools := range []int{1000, 10_000} {
		for _, catalog := range []string{"echo", "realistic"} {
			for _, words := range []string{"cached", "new", "unheld"} {
				b.Run(fmt.Sprintf("tools=%d/catalog=%s/words=%s", tools, catalog, words), func(b *testing.B) {
					benchmarkSearch(b, tools, catalog, words)
				})
			}
		}
	}
}

// unseenWord is a word no query or tool has: "zq" and i in base 26.
func unseenWord(i int) string {
	w := []byte("zq")
	for n := i; ; n /= 26 {
		w = append(w, byte('a'+n%26))
		if n < 26 {
			return string(w)
		}
	}
}

// unheldWord is a word of the caller's no tool holds, of the length that
// makes a search look for the tools' lexemes one edit from it: "zqzqzq"
// and i in base 26; the first 100 (the warm-up) are stemmed again.
func unheldWord(i int) string { return "zqzq" + unseenWord(i) }

func benchmarkSearch(b *testing.B, tools int, catalog string, words string) {
	const principals = 100
	db := env.NewDatabase(b)
	h := start(b, db)
	r := rand.New(rand.NewPCG(5, 5))
	query := func(i int) string { return echoQueries[i%len(echoQueries)] }
	if catalog == "echo" {
		h.agg.SetTools(echoCatalog(tools))
	} else {
		h.agg.SetTools(realisticCatalog(tools))
		query = func(int) string { return storetest.SyntheticQuery(r) }
	}
	h.waitServing(b)
	search := func(i int) {
		text := query(i)
		switch words {
		case "new":
			text += " " + unseenWord(i)
		case "unheld":
			// Long enough to look for lexemes one edit away (none is).
			text += " " + unheldWord(i)
		}
		resp, err := h.client.Search(b.Context(), &indexerv1.SearchRequest{
			Principal: &commonv1.Principal{Subject: "user-" + strconv.Itoa(i%principals)}, Query: text,
		})
		if err != nil || len(resp.GetHits()) == 0 || int(resp.GetScopeSize()) != tools {
			b.Fatalf("search: %v, %v", resp, err)
		}
	}
	// Build the scope and resolve every principal once: the benchmark is
	// of the steady state, not of first searches.
	for i := range principals {
		search(i)
	}
	backends := pgBackends(b, db)
	pgBefore, goBefore := backends.cpuTicks(b), processCPU()
	i := principals
	for b.Loop() {
		search(i)
		i++
	}
	pgTicks, goCPU := backends.cpuTicks(b)-pgBefore, processCPU()-goBefore
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/op")
	b.ReportMetric(float64(goCPU.Microseconds())/float64(b.N), "go-cpu-us/op")
	b.ReportMetric(float64(pgTicks)*1e6/clockTicks/float64(b.N), "pg-cpu-us/op")
}

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat.
const clockTicks = 100

// backendSet is the PostgreSQL server processes connected to one database.
type backendSet []int

// pgBackends lists the backends serving databaseURL's database (the
// indexer's pool, once a search has warmed it).
func pgBackends(b *testing.B, databaseURL string) backendSet {
	b.Helper()
	conn, err := pgx.Connect(b.Context(), databaseURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(b.Context())
	rows, err := conn.Query(b.Context(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(pids) == 0 {
		b.Fatalf("indexer backends: %v, %v", pids, err)
	}
	var set backendSet
	for _, p := range pids {
		set = append(set, int(p))
	}
	return set
}

// cpuTicks sums user and system time of the backends still alive.
func (s backendSet) cpuTicks(b *testing.B) int64 {
	var total int64
	for _, pid := range s {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // the backend exited; its time is lost to the figure
		}
		// Fields after the parenthesized command: state is field 3, utime 14, stime 15.
		rest := string(raw[strings.LastIndexByte(string(raw), ')')+2:])
		f := strings.Fields(rest)
		for _, idx := range []int{14 - 3, 15 - 3} {
			v, err := strconv.ParseInt(f[idx], 10, 64)
			if err != nil {
				b.Fatalf("parse /proc/%d/stat: %v", pid, err)
			}
			total += v
		}
	}
	return total
}

// processCPU is this process's user and system CPU time so far.
func processCPU() (d cpuDuration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpuDuration(ru.Utime.Nano() + ru.Stime.Nano())
}

type cpuDuration int64

func (d cpuDuration) Microseconds() int64 { return int64(d) / 1000 }
