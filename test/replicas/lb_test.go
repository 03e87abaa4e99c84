package replicas

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

// servedByHeader names the gateway that answered a request. The load
// balancer adds it to every response (the server's name in its backend
// section, gateway-1 or gateway-2), so a test can see its requests move.
const servedByHeader = "X-Switchboard-Gateway"

// haproxyPath is the HAProxy binary: $HAPROXY (make test sets it), else
// haproxy on $PATH. Its absence fails the test: make haproxy installs the
// pinned Debian package.
func haproxyPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("HAPROXY")
	if path == "" {
		found, err := exec.LookPath("haproxy")
		if err != nil {
			t.Fatal("HAProxy is required for the replica tests: run `make haproxy` (installs the pinned Debian package) or set $HAPROXY")
		}
		path = found
	}
	out, err := exec.Command(path, "-v").Output()
	if err != nil || !strings.HasPrefix(string(out), "HAProxy version ") {
		t.Fatalf("%s -v: %v %q; the replica tests need HAProxy (make haproxy)", path, err, out)
	}
	return path
}

// haproxyConfig balances every HTTP request over the gateways in turn:
//
//   - mode http with keep-alive on both sides: a client keeps its
//     connection to HAProxy, and each request on it is balanced on its own
//     (roundrobin; no cookie, stick table or prefer-last-server, so no
//     stickiness of any kind);
//   - responses are forwarded as they come (HAProxy does not buffer a
//     response body, and no compression or cache is configured), so SSE
//     events reach the client at once;
//   - timeout client/server are the idle limits of an open request: an hour,
//     so a quiet Legacy GET stream or a Modern listen (kept alive by the
//     gateway's comments anyway) is not cut, while connect and keep-alive
//     stay short;
//   - each gateway is health-checked on /readyz every 200 ms and taken out
//     after one failure, as a Kubernetes readiness probe would (faster, to
//     keep the test short): a gateway gone or not ready fails its check at
//     once, one that hangs after 2 s (timeout check, so that a check merely
//     slow on a loaded machine does not count); a connection refused is
//     retried once on the other gateway (retry-on conn-failure with
//     redispatch: the request was never sent, so this is safe for any
//     method).
func haproxyConfig(listen string, gateways []string) string {
	var b strings.Builder
	b.WriteString(`global
    maxconn 4096
    log stderr format raw local0 info

defaults
    mode http
    log global
    option httplog
    option http-keep-alive
    timeout connect 2s
    timeout client 1h
    timeout server 1h
    timeout http-request 10s
    timeout http-keep-alive 30s
    timeout queue 5s
    retries 1
    retry-on conn-failure
    option redispatch 1

frontend mcp
    bind ` + listen + `
    default_backend gateways

backend gateways
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host 127.0.0.1
    http-check expect status 200
    # A gateway that is gone or answers not ready is out at its first
    # failed check; a check that is merely slow on a loaded machine has
    # 2s (without this, HAProxy allows only inter, 200ms).
    timeout check 2s
    default-server check inter 200ms fall 1 rise 1
    http-response set-header ` + servedByHeader + ` %[srv_name]
`)
	for i, gw := range gateways {
		fmt.Fprintf(&b, "    server %s %s\n", gatewayName(i), gw)
	}
	return b.String()
}

// gatewayName is the name of replica i (from 0) of the gateway, as a
// process and as an HAProxy server.
func gatewayName(i int) string { return fmt.Sprintf("gateway-%d", i+1) }

// startLB writes the configuration, checks it with haproxy -c, and runs
// haproxy in the foreground as a child of the test, until the test ends.
// It is ready once it answers through both gateways.
func startLB(t *testing.T, gateways []string) (*harness.Proc, string) {
	t.Helper()
	bin := haproxyPath(t)
	listen := harness.FreeAddr(t)
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(haproxyConfig(listen, gateways)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-q", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
	url := "http://" + listen
	seen := map[string]bool{}
	lb := harness.StartExternal(t, "haproxy", bin, []string{"-db", "-f", path}, nil, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			seen[resp.Header.Get(servedByHeader)] = true
		}
		if len(seen) < len(gateways) {
			return fmt.Errorf("answered through %v of %d gateways", seen, len(gateways))
		}
		return nil
	})
	return lb, url
}

// lbSettle bounds how long HAProxy takes to see a gateway die or come
// back: a few health-check intervals.
const lbSettle = 2 * time.Second
