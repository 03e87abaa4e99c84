package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// announcedMaxStreams is the SETTINGS_MAX_CONCURRENT_STREAMS the server at
// addr announces on a connection; false when it announces none (gRPC's
// default, no bound).
func announcedMaxStreams(t *testing.T, addr string) (uint32, bool) {
	t.Helper()
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
	if _, err := indexerv1.NewIndexerServiceClient(conn).RefreshScope(context.Background(), &indexerv1.RefreshScopeRequest{Principal: &commonv1.Principal{Subject: "alice"}}); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	fr := http2.NewFramer(nil, bytes.NewReader(rec.read.Bytes()))
	fr.SetMaxReadFrameSize(1 << 24)
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatal("the server sent no SETTINGS frame")
		}
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			return s.Value(http2.SettingMaxConcurrentStreams)
		}
	}
}

// Every server bounds the streams one connection may hold at once
// (grpc.maxConcurrentStreams): the default unless the service passes its
// configuration's value.
func TestServerBoundsConcurrentStreams(t *testing.T) {
	if n, ok := announcedMaxStreams(t, startServer(t, testCreds)); !ok || n != config.DefaultMaxConcurrentStreams {
		t.Errorf("default server announces %d (set %v), want %d", n, ok, config.DefaultMaxConcurrentStreams)
	}
	configured := startIndexer(t, testCreds, principalEcho, rpc.ConnectionOptions(config.GRPC{MaxConcurrentStreams: 500})...)
	if n, ok := announcedMaxStreams(t, configured); !ok || n != 500 {
		t.Errorf("configured server announces %d (set %v), want 500", n, ok)
	}
}

// A caller has at most Max streams open (DefaultStreamsPerCaller when
// unset); closing one makes room, and another caller is not held to the
// first's count.
func TestStreamQuota(t *testing.T) {
	for _, c := range []struct {
		q   *rpc.StreamQuota
		max int
	}{{&rpc.StreamQuota{}, rpc.DefaultStreamsPerCaller}, {&rpc.StreamQuota{Max: 3}, 3}} {
		var releases []func()
		for range c.max {
			release, err := c.q.Acquire("gateway")
			if err != nil {
				t.Fatal(err)
			}
			releases = append(releases, release)
		}
		if _, err := c.q.Acquire("gateway"); !errors.Is(err, rpc.ErrTooManyStreams) {
			t.Fatalf("stream %d of a bound of %d: %v", c.max+1, c.max, err)
		}
		if _, err := c.q.Acquire("other"); err != nil {
			t.Fatalf("another caller: %v", err)
		}
		releases[0]()
		if _, err := c.q.Acquire("gateway"); err != nil {
			t.Fatalf("after one closed: %v", err)
		}
	}
}
