package edge

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// BenchmarkToolsCall drives a tools/call through the gateway over real
// HTTP, to an aggregator over real gRPC (loopback, service token auth),
// in each era, one call at a time (c=1) and 16 at once (c=16). The
// aggregator is this package's fake, which answers at once, so the figure
// is the edge's own path: HTTP guards, framing, the era's rules,
// authentication, the gRPC round trip and the response. Beside ns/op and
// allocs/op it reports cpu-us/op, the CPU this process spent per call: the
// gateway, the benchmark's HTTP client and the fake aggregator's gRPC
// server together. Use it for side-by-side comparisons of the edge
// (interleaved rounds of two builds) and for its CPU profile
// (-cpuprofile); the load harness (make bench) measures the services as
// processes.
func BenchmarkToolsCall(b *testing.B) {
	backends := startBackends(b)
	_, srv := startGateway(b, backends, testGatewayConfig(backends))
	url := srv.URL + "/mcp"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	modern := benchRequest{url: url, header: modernHeaders("tools/call", "Mcp-Name", "alpha_echo"),
		body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"alpha_echo","arguments":{"text":"hello"}}}`}
	legacy := benchRequest{url: url, header: legacyHeaders("alice-key", benchInitialize(b, client, url)),
		body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"alpha_echo","arguments":{"text":"hello"}}}`}
	for _, era := range []struct {
		name string
		req  benchRequest
	}{{mcpspec.Modern, modern}, {mcpspec.Legacy, legacy}} {
		if err := era.req.do(client); err != nil {
			b.Fatalf("%s: first call: %v", era.name, err)
		}
		for _, c := range []int{1, 16} {
			b.Run(fmt.Sprintf("era=%s/c=%d", era.name, c), func(b *testing.B) {
				b.ReportAllocs()
				start := benchCPU()
				if c == 1 {
					for b.Loop() {
						if err := era.req.do(client); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism((c + 1) / 2)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := era.req.do(client); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.StopTimer()
				b.ReportMetric(float64((benchCPU()-start).Microseconds())/float64(b.N), "cpu-us/op")
			})
		}
	}
}

// benchRequest is one tools/call as a client sends it, again and again.
type benchRequest struct {
	url    string
	header map[string]string
	body   string
}

// do sends the call and checks that its result came back.
func (r benchRequest) do(client *http.Client) error {
	req, err := http.NewRequest(http.MethodPost, r.url, strings.NewReader(r.body))
	if err != nil {
		return err
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`alice:alpha_echo`)) {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	return nil
}

// benchInitialize opens a Legacy session for alice and returns its id.
func benchInitialize(b *testing.B, client *http.Client, url string) string {
	b.Helper()
	post := func(header map[string]string, body string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post(legacyHeaders("alice-key", ""), initializeBody)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		b.Fatalf("initialize: HTTP %d, session %q", resp.StatusCode, id)
	}
	if resp := post(legacyHeaders("alice-key", id), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		b.Fatalf("notifications/initialized: HTTP %d", resp.StatusCode)
	}
	return id
}

// benchCPU is the CPU time this process has used.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
