package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// demoBackendBinary builds the real demo backend once per test binary.
var demoBackendBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "switchboard-demo-backend")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/switchboard-mcp/switchboard/services/cmd/switchboard-demo-backend").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build demo backend: %v: %s", err, out)
	}
	return bin, nil
})

// demoBackendProcess is a demo backend running as its own process, so
// that its CPU is not the benchmark's.
type demoBackendProcess struct {
	url string
	cmd *exec.Cmd
}

func startDemoBackend(b *testing.B, tools int) *demoBackendProcess {
	b.Helper()
	bin, err := demoBackendBinary()
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	cmd := exec.Command(bin, "--listen", addr, "--name", "demo", "--synthetic", strconv.Itoa(tools))
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The backend logs "serving" once it listens.
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "serving") {
			break
		}
	}
	go func() {
		for lines.Scan() {
		}
	}()
	return &demoBackendProcess{url: "http://" + addr + "/mcp", cmd: cmd}
}

// cpuTime is the CPU time (user + system) a process used so far.
func (p *demoBackendProcess) cpuTime(b *testing.B) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which is in parentheses): utime is the
	// 14th field of the line, stime the 15th, in clock ticks (100 Hz).
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCallTool drives CallTool over real gRPC (loopback, service
// token auth) through the aggregator to a real demo backend process over
// HTTP, per era the aggregator speaks to the backend, one call at a time
// (c=1) and 16 at once (c=16). It reports, beside ns/op and allocs/op, the
// CPU this process spent per call (the aggregator and the benchmark's own
// gRPC client: see BenchmarkGRPCFloor for the latter's share) and the
// backend process's CPU per call. Profile with -cpuprofile; the backend's
// work is not in it.
func BenchmarkCallTool(b *testing.B) {
	backend := startDemoBackend(b, 200)
	for _, era := range []string{"2026-07-28", "2025-11-25"} {
		name := "demo" + strings.ReplaceAll(era, "-", "")
		cfg := parseConfig(b, "aggregator:\n  catalogTTL: 1h\n  backends:\n    - {name: "+name+", url: "+backend.url+", protocol: \""+era+"\"}\n")
		h := startAggregator(b, cfg)
		req := &aggregatorv1.CallToolRequest{Principal: principal("alice", "eng"), Name: name + "_tool_0042", ArgumentsJson: `{"message":"hello","n":42}`}
		ctx := context.Background()
		if resp, err := h.gateway.CallTool(ctx, req); err != nil || !strings.Contains(resp.GetResultJson(), "hello") {
			b.Fatalf("first call: %v %v", resp, err)
		}
		for _, c := range []int{1, 16} {
			b.Run(fmt.Sprintf("era=%s/c=%d", era, c), func(b *testing.B) {
				measureCPU(b, backend, c, func() error {
					_, err := h.gateway.CallTool(ctx, req)
					return err
				})
			})
		}
	}
}

// BenchmarkGRPCFloor is the benchmark's gRPC part of BenchmarkCallTool
// alone: the same client, credentials and server, calling ListBackends of
// an aggregator without backends, which does next to nothing.
func BenchmarkGRPCFloor(b *testing.B) {
	h := startAggregator(b, parseConfig(b, "aggregator:\n  catalogTTL: 1h\n"))
	req := &aggregatorv1.ListBackendsRequest{Principal: principal("alice", "eng")}
	for _, c := range []int{1, 16} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			measureCPU(b, nil, c, func() error {
				_, err := h.gateway.ListBackends(context.Background(), req)
				return err
			})
		})
	}
}

// measureCPU runs call b.N times from c goroutines and reports CPU per
// call of this process and of the backend process (if any).
func measureCPU(b *testing.B, backend *demoBackendProcess, c int, call func() error) {
	b.ReportAllocs()
	var backendStart time.Duration
	if backend != nil {
		backendStart = backend.cpuTime(b)
	}
	selfStart := selfCPU()
	b.ResetTimer()
	if c == 1 {
		for b.Loop() {
			if err := call(); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism((c + 1) / 2)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64((selfCPU()-selfStart).Microseconds())/n, "cpu-us/op")
	if backend != nil {
		b.ReportMetric(float64((backend.cpuTime(b)-backendStart).Microseconds())/n, "backend-cpu-us/op")
	}
}

// BenchmarkCallToolTrail measures what the audit trail costs a Modern
// tools/call: two aggregators in this process, one with the trail off and
// one with it on (the file sink, argument digests), called in alternating
// rounds of the same number of calls, so that a shared machine's load
// falls on both alike. cpu-us/op-off and cpu-us/op-on are this process's
// CPU per call in the rounds of each (the trail's background writer
// included: each round with the trail waits past the writer's flush
// before its CPU is read); trail-ratio is on/off.
func BenchmarkCallToolTrail(b *testing.B) {
	backend := startDemoBackend(b, 200)
	base := "aggregator:\n  catalogTTL: 1h\n  backends:\n    - {name: demo, url: " + backend.url + "}\n"
	noEnv := func(string) (string, bool) { return "", false }
	var aggs [2]*harness
	for i, extra := range []string{"", "audit: {sink: file, file: " + filepath.Join(b.TempDir(), "audit.jsonl") + "}\n"} {
		full, err := config.Parse([]byte(base+extra), noEnv)
		if err != nil {
			b.Fatal(err)
		}
		if aggs[i], err = startAggregatorWith(b, full, quietLog); err != nil {
			b.Fatal(err)
		}
	}
	if aggs[0].audit != nil || aggs[1].audit == nil {
		b.Fatal("the trail is not off and on")
	}
	req := &aggregatorv1.CallToolRequest{Principal: principal("alice", "eng"), Name: "demo_tool_0042", ArgumentsJson: `{"message":"hello","n":42}`}
	ctx := context.Background()
	for _, h := range aggs {
		if resp, err := h.gateway.CallTool(ctx, req); err != nil || !strings.Contains(resp.GetResultJson(), "hello") {
			b.Fatalf("first call: %v %v", resp, err)
		}
	}
	const round = 200
	for _, c := range []int{1, 16} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			var cpu [2]time.Duration
			var calls [2]int
			b.ResetTimer()
			for done := 0; done < b.N; done += round {
				for i, h := range aggs {
					start := selfCPU()
					if err := callRound(ctx, h.gateway, req, c, round); err != nil {
						b.Fatal(err)
					}
					if h.audit != nil {
						// The writer flushes within DefaultFlushEvery: its
						// work on this round's events lands in this round.
						time.Sleep(audit.DefaultFlushEvery + 50*time.Millisecond)
					}
					cpu[i] += selfCPU() - start
					calls[i] += round
				}
			}
			b.StopTimer()
			off := float64(cpu[0].Microseconds()) / float64(calls[0])
			on := float64(cpu[1].Microseconds()) / float64(calls[1])
			b.ReportMetric(off, "cpu-us/op-off")
			b.ReportMetric(on, "cpu-us/op-on")
			b.ReportMetric(on/off, "trail-ratio")
		})
	}
}

// callRound makes n calls from c goroutines.
func callRound(ctx context.Context, client aggregatorv1.AggregatorServiceClient, req *aggregatorv1.CallToolRequest, c, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, c)
	per := n / c
	for range c {
		wg.Go(func() {
			for range per {
				if _, err := client.CallTool(ctx, req); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
