// Command switchboard-load measures a real Switchboard cluster: it starts
// demo backends, the aggregator, the indexer (over a throwaway PostgreSQL)
// and the gateway as separate processes on loopback ports, drives them
// with go-sdk clients in both protocol eras, runs the same workloads
// directly against a demo backend for comparison, and writes Markdown.
//
//	switchboard-load bench [--bin bin] [--out docs/load-results.md] [--profile DIR]
//	switchboard-load soak --duration 5m --rate 50 [--bin bin] [--out docs/load-results.md]
//
// bench runs W1 (tools/call throughput and latency at 1,000 and 10,000
// tools, directly, through a plain reverse proxy and through Switchboard),
// find_tool through the stack, tasks (what a call that becomes a task
// costs over a plain one, and tasks/get), W2 (tools/list walks, cold and
// warm), W3 (connect cost) and W4 (resident memory); with --profile it also writes
// CPU and allocation profiles of the services. soak runs mixed traffic at a
// fixed rate and reports whether memory or goroutines grow. Both stop by
// themselves; Ctrl-C stops them early and cleanly.
//
// "switchboard-load proxy" is the reference proxy bench starts as a
// process of its own; it is not meant to be run by hand.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/test/load"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "switchboard-load:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  switchboard-load bench [flags]   W1-W4 and find_tool, through Switchboard, a plain proxy and direct; writes Markdown
  switchboard-load soak [flags]    mixed traffic at a fixed rate; reports growth
run "switchboard-load <command> -h" for the flags`

func run(args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "bench":
		return bench(ctx, args[1:])
	case "soak":
		return soak(ctx, args[1:])
	case load.ProxyCommand:
		return load.RunProxy(args[1:])
	case "-h", "--help", "help":
		fmt.Println(usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// common are the flags both commands take.
type common struct {
	bin, out, logs string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.bin, "bin", "bin", "directory holding the binaries built by make build")
	fs.StringVar(&c.out, "out", "docs/load-results.md", "Markdown results file; this command rewrites its own section")
	fs.StringVar(&c.logs, "logs", "", "write the services' output to this file (default: shown only when a run fails)")
}

// env starts the shared environment. The services' output goes to the
// logs file or to a bounded buffer printed when the run fails.
func (c *common) env(ctx context.Context) (*load.Env, func(failed bool), error) {
	var logs io.Writer
	var tail *tailBuffer
	var file *os.File
	if c.logs != "" {
		f, err := os.Create(c.logs)
		if err != nil {
			return nil, nil, err
		}
		logs, file = f, f
	} else {
		tail = &tailBuffer{max: 200}
		logs = tail
	}
	env, err := load.NewEnv(ctx, c.bin, logs)
	if err != nil {
		if file != nil {
			file.Close()
		}
		return nil, nil, err
	}
	return env, func(failed bool) {
		if err := env.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "switchboard-load: cleanup:", err)
		}
		if file != nil {
			file.Close()
		}
		if failed && tail != nil {
			fmt.Fprintln(os.Stderr, "last lines of the services' output:")
			tail.WriteTo(os.Stderr)
		}
	}, nil
}

func bench(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var c common
	c.register(fs)
	callDuration := fs.Duration("call-duration", 5*time.Second, "length of each W1 run")
	concurrency := fs.String("concurrency", "1,4,16", "W1 numbers of concurrent clients, ascending; the last is W4's load")
	large := fs.String("large-catalog", "20x500", "the second W1 catalog, BACKENDSxTOOLS")
	largeConcurrency := fs.String("large-concurrency", "1,16", "W1 numbers of concurrent clients over the second catalog")
	maxCalls := fs.Int("max-calls", 2_000_000, "upper bound on the calls of one W1 or find_tool run")
	runs := fs.Int("runs", 3, "W1 repetitions; the figures are medians")
	principals := fs.Int("principals", 100, "API keys of the W1 clusters' gateway; find_tool runs once at 1 client over all of them")
	findConcurrency := fs.String("find-concurrency", "1,4", "find_tool numbers of concurrent clients, one principal")
	findDuration := fs.Duration("find-duration", 5*time.Second, "length of each find_tool run")
	tasksDuration := fs.Duration("tasks-duration", 0, "length of each part of the tasks measurement (plain call, task round trip, tasks/get), run once at the lowest and the top --concurrency; default --call-duration, 0 skips it (for binaries without tasks)")
	walks := fs.Int("walks", 5, "W2 warm walks per side, size and era")
	connects := fs.Int("connects", 20, "W3 connects per side, size and era")
	small := fs.Bool("small", false, "skip the second W1 catalog and the 10,000-tool W2/W3 catalog (smoke runs)")
	profile := fs.String("profile", "", "turn on the services' profiles and write CPU and allocation profiles into this directory")
	profileSeconds := fs.Int("profile-seconds", 10, "length of each profile")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// Unset, the tasks measurement runs as long as a W1 run.
	tasksSet := false
	fs.Visit(func(f *flag.Flag) { tasksSet = tasksSet || f.Name == "tasks-duration" })
	if !tasksSet {
		*tasksDuration = *callDuration
	}
	levels, err := parseLevels("--concurrency", *concurrency)
	if err != nil {
		return err
	}
	largeLevels, err := parseLevels("--large-concurrency", *largeConcurrency)
	if err != nil {
		return err
	}
	findLevels, err := parseLevels("--find-concurrency", *findConcurrency)
	if err != nil {
		return err
	}
	largeTopology, err := parseTopology(*large)
	if err != nil {
		return err
	}
	if *callDuration <= 0 || *callDuration > 10*time.Minute || *findDuration <= 0 || *findDuration > 10*time.Minute ||
		*walks < 1 || *connects < 1 || *maxCalls < 1 || *runs < 1 || *runs > 20 {
		return errors.New("--call-duration and --find-duration must be in (0, 10m]; --walks, --connects and --max-calls at least 1; --runs in [1, 20]")
	}
	if *tasksDuration < 0 || *tasksDuration > 10*time.Minute {
		return errors.New("--tasks-duration must be in [0, 10m]")
	}
	if *principals < 1 || *principals > 10000 || *profileSeconds < 1 || *profileSeconds > 300 {
		return errors.New("--principals must be in [1, 10000], --profile-seconds in [1, 300]")
	}
	catalogs := load.DefaultCatalogs
	if *small {
		catalogs = catalogs[:1]
		largeTopology = load.Topology{}
	}
	var finds []load.FindSpec
	for i, n := range findLevels {
		finds = append(finds, load.FindSpec{Concurrency: n, Principals: 1})
		if i == 0 && *principals > 1 {
			finds = append(finds, load.FindSpec{Concurrency: n, Principals: *principals})
		}
	}
	opts := load.BenchOptions{
		CallDuration: *callDuration, Concurrency: levels, MaxCallsPerRun: *maxCalls, Runs: *runs,
		Large: largeTopology, LargeConcurrency: largeLevels, Principals: *principals,
		Find: finds, FindDuration: *findDuration, TaskDuration: *tasksDuration,
		Walks: *walks, Connects: *connects, Catalogs: catalogs,
		ProfileDir: *profile, ProfileSeconds: *profileSeconds, Progress: os.Stderr,
	}
	env, done, err := c.env(ctx)
	if err != nil {
		return err
	}
	defer func() { done(err != nil) }()
	res, err := load.RunBench(ctx, env, opts)
	if err != nil {
		return err
	}
	md := load.BenchMarkdown(res)
	fmt.Println(md)
	if err := load.WriteSection(c.out, load.SectionBench, md); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote", c.out)
	return nil
}

func soak(ctx context.Context, args []string) (err error) {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	var c common
	c.register(fs)
	duration := fs.Duration("duration", 5*time.Minute, "how long to run the traffic")
	rate := fs.Float64("rate", 50, "operations per second")
	interval := fs.Duration("sample-every", 5*time.Second, "how often RSS and goroutines are sampled")
	relTol := fs.Float64("tolerance", 0.10, "growth of the last fifth's mean over the first's that counts, as a fraction")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *duration <= 0 || *duration > 24*time.Hour || *rate <= 0 || *rate > 10000 || *interval <= 0 {
		return errors.New("--duration must be in (0, 24h], --rate in (0, 10000], --sample-every positive")
	}
	env, done, err := c.env(ctx)
	if err != nil {
		return err
	}
	defer func() { done(err != nil) }()
	res, err := load.RunSoak(ctx, env, load.SoakOptions{
		Duration: *duration, Rate: *rate, SampleEvery: *interval, RelTolerance: *relTol, Progress: os.Stderr,
	})
	if err != nil {
		return err
	}
	md := load.SoakMarkdown(res)
	fmt.Println(md)
	if err := load.WriteSection(c.out, load.SectionSoak, md); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote", c.out)
	if res.Grows() {
		return errors.New("resident memory or goroutines grew during the soak (see the table)")
	}
	return nil
}

func parseLevels(flag, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 || (len(out) > 0 && n <= out[len(out)-1]) {
			return nil, fmt.Errorf("%s: want ascending numbers in [1, 1024], got %q", flag, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseTopology reads "BACKENDSxTOOLS", e.g. "20x500".
func parseTopology(s string) (load.Topology, error) {
	b, t, ok := strings.Cut(s, "x")
	backends, err1 := strconv.Atoi(b)
	tools, err2 := strconv.Atoi(t)
	if !ok || err1 != nil || err2 != nil || backends < 1 || backends > 100 || tools < 1 || tools > 10000 {
		return load.Topology{}, fmt.Errorf("--large-catalog: want BACKENDSxTOOLS with 1-100 backends of 1-10000 tools, got %q", s)
	}
	return load.Topology{Backends: backends, ToolsPerBackend: tools}, nil
}

// tailBuffer keeps the last max lines written to it.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	lines   []string
	partial string
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	text := t.partial + string(p)
	parts := strings.Split(text, "\n")
	t.partial = parts[len(parts)-1]
	t.lines = append(t.lines, parts[:len(parts)-1]...)
	if over := len(t.lines) - t.max; over > 0 {
		t.lines = append(t.lines[:0], t.lines[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) WriteTo(w io.Writer) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for _, l := range t.lines {
		k, err := fmt.Fprintln(w, l)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
