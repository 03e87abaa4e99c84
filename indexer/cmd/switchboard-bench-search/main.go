// Command switchboard-bench-search measures tool-search quality. It loads a
// tool set into the indexer (PostgreSQL), runs a query set through the
// Search RPC and prints Recall@1/@5/@10, NDCG@10, MRR@10 and the zero-hit
// rate.
//
//	switchboard-bench-search --tools tools.json --queries queries.jsonl [--bin DIR]
//
// tools.json is {"name": "description", ...}; queries.jsonl has one
// {"query": "...", "tools": ["gold name", ...]} per line.
//
// With --bin, the load goes the production way, through separate
// processes: the demo MCP backend serving the tools, the aggregator
// listing them over MCP, and the indexer reading them from the aggregator.
// Without it, the indexer runs in this process and reads the tools from an
// in-process aggregator service; that path is for quick ranking
// experiments (--ranking).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/pgcluster"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/testkit"

	"github.com/switchboard-mcp/switchboard/indexer/internal/app"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

type query struct {
	Query string   `json:"query"`
	Tools []string `json:"tools"`
}

type options struct {
	toolsPath, queriesPath string
	binDir                 string
	database               string
	limit                  int
	ranking                string
	misses                 int
	parallel               int
	split                  string
}

func main() {
	var o options
	fs := flag.NewFlagSet("switchboard-bench-search", flag.ContinueOnError)
	fs.StringVar(&o.toolsPath, "tools", "", "tools as a JSON object {name: description} (required)")
	fs.StringVar(&o.queriesPath, "queries", "", "queries as JSON lines {query, tools} (required)")
	fs.StringVar(&o.binDir, "bin", "", "directory with switchboard-demo-backend, switchboard-aggregator and switchboard-indexer; empty: in-process indexer and aggregator")
	fs.StringVar(&o.database, "database", "", "PostgreSQL URL of an empty database; empty: a throwaway cluster")
	fs.IntVar(&o.limit, "limit", 10, "hits per search")
	fs.StringVar(&o.ranking, "ranking", "", "in-process only: JSON overriding fields of the default ranking (store.Ranking)")
	fs.IntVar(&o.parallel, "parallel", 1, "searches in flight")
	fs.IntVar(&o.misses, "show-misses", 0, "print this many queries whose gold tool is not in the top 5")
	fs.StringVar(&o.split, "split", "all", "which queries: all, tune (three quarters, for choosing weights) or held (the held-back quarter, for checking them)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if o.toolsPath == "" || o.queriesPath == "" {
		fmt.Fprintln(os.Stderr, "switchboard-bench-search: --tools and --queries are required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "switchboard-bench-search:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	tools, err := loadTools(o.toolsPath)
	if err != nil {
		return err
	}
	queries, err := loadQueries(o.queriesPath)
	if err != nil {
		return err
	}
	switch o.split {
	case "all":
	case "tune", "held":
		queries = slices.DeleteFunc(queries, func(q query) bool { return heldBack(q.Query) != (o.split == "held") })
	default:
		return fmt.Errorf("--split %q: want all, tune or held", o.split)
	}
	if o.ranking != "" {
		if o.binDir != "" {
			return errors.New("--ranking applies to the in-process indexer only")
		}
		dec := json.NewDecoder(strings.NewReader(o.ranking))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&store.DefaultRanking); err != nil {
			return fmt.Errorf("--ranking: %w", err)
		}
	}

	dbURL := o.database
	if dbURL == "" {
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{TCP: o.binDir != ""})
		if err != nil {
			return err
		}
		defer cluster.Stop()
		if err := cluster.CreateDatabase(ctx, "bench"); err != nil {
			return err
		}
		dbURL = cluster.URL("bench")
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		indexerAddr string
		// advertised maps a tool name as the indexer returns it to the name
		// in the data set (the aggregator may prefix names).
		advertised func(string) string
		stopAll    func()
	)
	start := time.Now()
	if o.binDir == "" {
		indexerAddr, stopAll, err = startInProcess(ctx, dbURL, tools)
	} else {
		indexerAddr, stopAll, err = startProcesses(ctx, o.binDir, o.toolsPath, dbURL)
	}
	// Both paths advertise a tool as the aggregator does, under its
	// backend's prefix, so that the in-process figures are the processes'.
	advertised = func(s string) string { return strings.TrimPrefix(s, benchBackend+"_") }
	if err != nil {
		return err
	}
	defer stopAll()

	conn, err := rpc.Dial(config.Endpoint{Address: indexerAddr, Token: benchToken}, config.TLS{})
	if err != nil {
		return err
	}
	defer conn.Close()
	client := indexerv1.NewIndexerServiceClient(conn)
	principal := &commonv1.Principal{Subject: "bench"}
	scopeSize, err := waitForScope(ctx, client, principal, len(tools))
	if err != nil {
		return err
	}
	loaded := time.Since(start)

	results, err := runQueries(ctx, client, principal, queries, o)
	if err != nil {
		return err
	}
	var m metrics
	var latencies []time.Duration
	shown := 0
	for i, q := range queries {
		gold := map[string]bool{}
		for _, g := range q.Tools {
			gold[g] = true
		}
		var ranked []string
		for _, name := range results[i].names {
			ranked = append(ranked, advertised(name))
		}
		latencies = append(latencies, results[i].latency)
		before := m.recall5
		m.add(ranked, gold)
		if shown < o.misses && m.recall5 == before {
			shown++
			fmt.Printf("miss: %q gold %v got %v\n", q.Query, q.Tools, ranked[:min(5, len(ranked))])
		}
	}
	slices.Sort(latencies)
	mode := "in-process aggregator and indexer"
	if o.binDir != "" {
		mode = "demo backend, aggregator and indexer processes"
	}
	fmt.Printf("path          %s\n", mode)
	fmt.Printf("tools         %d (scope %d, loaded in %s)\n", len(tools), scopeSize, loaded.Round(time.Millisecond))
	fmt.Printf("queries       %d (split %s)\n", m.queries, o.split)
	fmt.Printf("Recall@1      %.1f\n", m.percent(m.recall1))
	fmt.Printf("Recall@5      %.1f\n", m.percent(m.recall5))
	fmt.Printf("Recall@10     %.1f\n", m.percent(m.recall10))
	fmt.Printf("NDCG@10       %.1f\n", m.percent(m.ndcg10))
	fmt.Printf("MRR@10        %.1f\n", m.percent(m.mrr10))
	fmt.Printf("zero-hit      %.1f%%\n", 100*float64(m.zeroHit)/float64(max(1, m.queries)))
	if m.multi > 0 {
		fmt.Printf("multi-tool    %.1f%% of %d queries with every gold tool in the top 10\n", 100*float64(m.multiAll)/float64(m.multi), m.multi)
	} else {
		fmt.Printf("multi-tool    none of the queries has more than one gold tool\n")
	}
	if len(latencies) > 0 {
		fmt.Printf("search p50    %s   p99 %s (Search RPC, %d in flight)\n",
			latencies[len(latencies)/2].Round(10*time.Microsecond), latencies[len(latencies)*99/100].Round(10*time.Microsecond), o.parallel)
	}
	return nil
}

// waitForScope builds the principal's scope and waits until it holds the
// whole tool set (the aggregator may still be fetching from the backend).
func waitForScope(ctx context.Context, client indexerv1.IndexerServiceClient, p *commonv1.Principal, want int) (uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		resp, err := client.RefreshScope(ctx, &indexerv1.RefreshScopeRequest{Principal: p})
		if err == nil && int(resp.GetScopeSize()) >= want {
			return resp.GetScopeSize(), nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("scope has %d of %d tools", resp.GetScopeSize(), want)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("indexer scope not complete: %v", last)
		case <-tick.C:
		}
	}
}

const (
	benchToken   = "bench-client-token"
	benchBackend = "metatool"
	// benchAggregatorToken is the indexer's credential at the fake
	// aggregator.
	benchAggregatorToken = "bench-aggregator-token"
)

// startInProcess runs the fake aggregator and the indexer in this process.
// The fake lists each tool as the aggregator lists the demo backend's:
// prefixed by the backend's name, with the backend's own name beside it.
func startInProcess(ctx context.Context, dbURL string, tools map[string]string) (string, func(), error) {
	agg := &testkit.FakeAggregator{}
	var list []*aggregatorv1.Tool
	for name, desc := range tools {
		list = append(list, &aggregatorv1.Tool{Name: benchBackend + "_" + name, OriginalName: name, Description: desc, InputSchemaJson: `{"type":"object"}`})
	}
	agg.SetTools(list)
	aggSrv, err := rpc.NewServer(svcauth.NewAuthenticator([]config.ServiceCredential{{Name: "indexer", Token: benchAggregatorToken, AssertPrincipals: true, Allow: config.IndexerMethods}}),
		config.TLS{}, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", nil, err
	}
	agg.Register(aggSrv)
	aggSrv.SetServing()
	aggLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	idxLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	aggDone, idxDone := make(chan struct{}), make(chan struct{})
	go func() { _ = aggSrv.ServeListener(ctx, aggLis, time.Second); close(aggDone) }()
	cfg := &config.Config{
		ServiceAuth: config.ServiceAuth{Credentials: []config.ServiceCredential{{Name: "bench", Token: benchToken, AssertPrincipals: true, Allow: []string{"switchboard.indexer.v1.IndexerService/*"}}}},
		Indexer: config.Indexer{
			Database:   dbURL,
			Aggregator: config.Endpoint{Address: aggLis.Addr().String(), Token: benchAggregatorToken},
		},
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() {
		if err := app.Run(ctx, cfg, log, app.Listeners{GRPC: idxLis}); err != nil {
			fmt.Fprintln(os.Stderr, "indexer:", err)
		}
		close(idxDone)
	}()
	return idxLis.Addr().String(), func() { cancel(); <-idxDone; <-aggDone }, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func loadTools(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tools map[string]string
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, fmt.Errorf("%s: want a JSON object {name: description}: %w", path, err)
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("%s: no tools", path)
	}
	return tools, nil
}

func loadQueries(path string) ([]query, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var qs []query
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var q query
		if err := json.Unmarshal(sc.Bytes(), &q); err != nil || q.Query == "" || len(q.Tools) == 0 {
			return nil, fmt.Errorf("%s:%d: want {\"query\": ..., \"tools\": [...]}", filepath.Base(path), line)
		}
		qs = append(qs, q)
	}
	return qs, sc.Err()
}

type result struct {
	names   []string
	latency time.Duration
}

// runQueries runs every query through the Search RPC, o.parallel at a time.
func runQueries(ctx context.Context, client indexerv1.IndexerServiceClient, p *commonv1.Principal, queries []query, o options) ([]result, error) {
	results := make([]result, len(queries))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, o.parallel))
	for i, q := range queries {
		g.Go(func() error {
			t0 := time.Now()
			resp, err := client.Search(ctx, &indexerv1.SearchRequest{Principal: p, Query: q.Query, Limit: uint32(o.limit)})
			if err != nil {
				return fmt.Errorf("search %q: %w", q.Query, err)
			}
			results[i].latency = time.Since(t0)
			for _, h := range resp.GetHits() {
				results[i].names = append(results[i].names, h.GetName())
			}
			return nil
		})
	}
	return results, g.Wait()
}
