package edge

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestReadAll reads bodies of every size whole, declared or not, and
// declared too short or too long, and sizes the buffer of a declared body
// exactly.
func TestReadAll(t *testing.T) {
	for _, n := range []int{0, 1, 16<<10 - 1, 16 << 10, 16<<10 + 1, 1 << 20, 3<<20 + 7} {
		body := bytes.Repeat([]byte("b"), n)
		for _, declared := range []int64{-1, int64(n), int64(n) / 2, int64(n) * 2} {
			got, err := readAll(iotest.HalfReader(bytes.NewReader(body)), declared)
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("n %d, declared %d: %d bytes, %v", n, declared, len(got), err)
			}
			if declared == int64(n) && cap(got) > n+1 {
				t.Errorf("n %d declared: capacity %d", n, cap(got))
			}
		}
	}
	if _, err := readAll(iotest.ErrReader(errors.New("broken")), 10); err == nil {
		t.Error("a read error was lost")
	}
}

// TestDeclaredOversizedBodyRefusedUnsent: a POST whose Content-Length is
// past gateway.http.maxBodyBytes is answered 413 at once, so a client
// that waits with Expect: 100-continue is never invited to send it (nor
// held until the body timeout waiting for bytes it was right to keep).
func TestDeclaredOversizedBodyRefusedUnsent(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.HTTP.MaxBodyBytes = 512
	_, srv := startGateway(t, b, cfg)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer alice-key\r\n"+
		"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Expect: 100-continue\r\nContent-Length: 100000\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(body, []byte(`"code":-32600`)) {
		t.Fatalf("oversized declared body: %d %s, want 413 with -32600", resp.StatusCode, body)
	}
}
