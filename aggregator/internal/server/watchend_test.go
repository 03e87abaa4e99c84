package server_test

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/server"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// endingContext ends with err when end is called, as a server stream's
// context ends when its caller's deadline passes or the caller goes away.
type endingContext struct {
	context.Context
	once sync.Once
	done chan struct{}
	err  error
}

func (c *endingContext) Done() <-chan struct{} { return c.done }

func (c *endingContext) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

func (c *endingContext) end() { c.once.Do(func() { close(c.done) }) }

// endingStream is a WatchCatalog stream whose context ends after the
// first event.
type endingStream struct {
	grpc.ServerStream
	ctx    *endingContext
	events int
}

func (s *endingStream) Context() context.Context { return s.ctx }

func (s *endingStream) Send(*aggregatorv1.WatchCatalogResponse) error {
	s.events++
	s.ctx.end()
	return nil
}

// A watch whose caller's deadline passes ends with DEADLINE_EXCEEDED (and
// one whose caller went away with CANCELLED), not with OK as if the stream
// had completed: a client such as grpcurl would report that as success.
func TestWatchEndsWithTheContextsStatus(t *testing.T) {
	h, _, _ := twoEras(t)
	srv := server.New(h.engine)
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
	} {
		ctx := &endingContext{Context: svcauth.WithPrincipal(context.Background(), principal("alice")), done: make(chan struct{}), err: tc.err}
		stream := &endingStream{ctx: ctx}
		err := srv.WatchCatalog(&aggregatorv1.WatchCatalogRequest{}, stream)
		if stream.events != 1 || status.Code(err) != tc.want {
			t.Errorf("context ended with %v: %d events, the watch ended with %v; want 1 event and %v", tc.err, stream.events, err, tc.want)
		}
	}
}
