package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// recordingConn keeps a copy of every byte read and written, so that the
// HTTP/2 frames of a connection can be parsed afterwards.
type recordingConn struct {
	net.Conn
	mu            sync.Mutex
	read, written bytes.Buffer
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

func (c *recordingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.written.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

// pings counts the PING frames that are not acknowledgements in an HTTP/2
// byte stream.
func pings(t *testing.T, stream []byte) (pings, frames int) {
	t.Helper()
	stream = bytes.TrimPrefix(stream, []byte(http2.ClientPreface))
	fr := http2.NewFramer(nil, bytes.NewReader(stream))
	fr.SetMaxReadFrameSize(1 << 24)
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return pings, frames
		}
		if err != nil {
			t.Fatalf("frame %d: %v", frames, err)
		}
		frames++
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			pings++
		}
	}
}

// Calls made one after another must not carry flow-control probes: gRPC's
// bandwidth estimator would send a PING each way with every call (rpc.go,
// streamWindow), which costs the request path frames, system calls and
// wake-ups in both processes.
func TestSequentialCallsSendNoPings(t *testing.T) {
	addr := startServer(t, testCreds)
	var rec *recordingConn
	dialer := func(ctx context.Context, a string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", a)
		if err != nil {
			return nil, err
		}
		rec = &recordingConn{Conn: c}
		return rec, nil
	}
	conn, err := rpc.Dial(config.Endpoint{Address: addr, Token: "gateway-secret"}, config.TLS{}, grpc.WithContextDialer(dialer))
	if err != nil {
		t.Fatal(err)
	}
	client := indexerv1.NewIndexerServiceClient(conn)
	const calls = 50
	for i := 0; i < calls; i++ {
		_, err := client.RefreshScope(context.Background(), &indexerv1.RefreshScopeRequest{Principal: &commonv1.Principal{Subject: "alice"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	sent, sentFrames := pings(t, rec.written.Bytes())
	received, receivedFrames := pings(t, rec.read.Bytes())
	if sentFrames < calls || receivedFrames < calls {
		t.Fatalf("parsed %d frames sent and %d received for %d calls: the recording is incomplete", sentFrames, receivedFrames, calls)
	}
	if sent != 0 || received != 0 {
		t.Errorf("%d calls: the client sent %d PINGs and the server %d, want none", calls, sent, received)
	}
}

// goroutineEcho answers RefreshScope with the ID of the goroutine that ran
// the handler.
func goroutineEcho(context.Context, *indexerv1.RefreshScopeRequest) (*indexerv1.RefreshScopeResponse, error) {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return &indexerv1.RefreshScopeResponse{ToolsDigest: id}, nil
}

// Calls run on goroutines the server keeps (rpc.go, streamWorkers), whose
// stacks have already grown, rather than on a new goroutine each.
func TestCallsRunOnKeptGoroutines(t *testing.T) {
	addr := startIndexer(t, testCreds, goroutineEcho)
	client := indexerv1.NewIndexerServiceClient(dial(t, addr, "gateway-secret"))
	const calls = 200
	seen := map[string]bool{}
	for i := 0; i < calls; i++ {
		resp, err := client.RefreshScope(context.Background(), &indexerv1.RefreshScopeRequest{Principal: &commonv1.Principal{Subject: "alice"}})
		if err != nil {
			t.Fatal(err)
		}
		seen[resp.GetToolsDigest()] = true
	}
	if len(seen) > 64 {
		t.Errorf("%d calls one after another ran on %d goroutines, want at most the 64 workers", calls, len(seen))
	}
}

// sizeEcho answers RefreshScope with a digest as long as the server name
// it was sent, so that one call carries a large message each way.
func sizeEcho(_ context.Context, req *indexerv1.RefreshScopeRequest) (*indexerv1.RefreshScopeResponse, error) {
	return &indexerv1.RefreshScopeResponse{ToolsDigest: strings.Repeat("d", len(req.GetServer()))}, nil
}

// Messages several times the fixed stream window (rpc.go, streamWindow)
// still cross both ways: the windows pace a large message, never stop it.
func TestMessagesLargerThanTheWindowCross(t *testing.T) {
	addr := startIndexer(t, testCreds, sizeEcho)
	client := indexerv1.NewIndexerServiceClient(dial(t, addr, "gateway-secret"))
	const size = 6 << 20
	resp, err := client.RefreshScope(context.Background(), &indexerv1.RefreshScopeRequest{Principal: &commonv1.Principal{Subject: "alice"}, Server: strings.Repeat("s", size)})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(resp.GetToolsDigest()); got != size {
		t.Errorf("answer of %d bytes, want %d", got, size)
	}
}
