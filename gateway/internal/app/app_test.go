package app_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestProcess builds and runs the real binary (cmd/switchboard-gateway,
// which calls Run): it serves /healthz at once, reports not ready while the
// aggregator is unreachable, refuses unauthenticated MCP requests with the
// RFC 9728 pointer, and exits cleanly on SIGTERM.
func TestProcess(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "switchboard-gateway")
	build := exec.Command("go", "build", "-o", bin, "github.com/switchboard-mcp/switchboard/gateway/cmd/switchboard-gateway")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	cfg := filepath.Join(dir, "switchboard.yaml")
	err = os.WriteFile(cfg, []byte(fmt.Sprintf(`
logging: {level: info, format: text}
gateway:
  listen: %s
  aggregator: {address: "127.0.0.1:1", token: "${GW_TOKEN}"}
  auth:
    mode: apiKeys
    apiKeys: [{key: "${GW_KEY}", subject: alice}]
`, addr)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Env = append(os.Environ(), "GW_TOKEN=service-token", "GW_KEY=alice-key")
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	base := "http://" + addr
	testkit.Eventually(t, "the gateway to serve /healthz", 20*time.Second, func() error {
		select {
		case err := <-exited:
			t.Fatalf("gateway exited early (%v):\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz answered %d", resp.StatusCode)
		}
		return nil
	})
	resp, err := http.Get(base + "/readyz")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz without an aggregator: %v %v", resp, err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{}`))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="http://`+addr+`/.well-known/oauth-protected-resource/mcp"`) {
		t.Fatalf("unauthenticated: %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-ctx.Done():
		t.Fatal("gateway did not stop on SIGTERM")
	}
}
